# store-postgres area: pg_store.c against a real PostgreSQL server.  The
# pg_server fixture starts one (tests/pg/server.sh: initdb into the build
# tree, a Unix socket, no TCP) and stops it; without PostgreSQL installed
# the fixture fails, so the tests fail rather than skip.
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
set(_pg_dir ${CMAKE_BINARY_DIR}/tests/pg-server)
add_test(NAME pg_server_start COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/pg/server.sh start ${_pg_dir})
add_test(NAME pg_server_stop COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/pg/server.sh stop ${_pg_dir})
set_tests_properties(pg_server_start PROPERTIES FIXTURES_SETUP pg_server TIMEOUT 120)
set_tests_properties(pg_server_stop PROPERTIES FIXTURES_CLEANUP pg_server TIMEOUT 60)

if(TARGET test_store_postgres)
  target_sources(test_store_postgres PRIVATE ${PROJECT_SOURCE_DIR}/plugins/store-postgres/pg_store.c)
  target_include_directories(test_store_postgres PRIVATE ${PROJECT_SOURCE_DIR}/plugins/store-postgres)
  add_dependencies(test_store_postgres weir-store-postgres)
  target_link_libraries(test_store_postgres PRIVATE PkgConfig::LIBPQ)
  set_tests_properties(test_store_postgres PROPERTIES FIXTURES_REQUIRED pg_server
    RESOURCE_LOCK pg_server ENVIRONMENT "${WEIR_TEST_ENV};WEIR_PG_CONNINFO_FILE=${_pg_dir}/conninfo")
endif()

# the CLI against the store (weir run / resume, a second writer, fencing)
add_test(NAME pg_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/pg_cli.sh $<TARGET_FILE:weir_cli>
         ${_pg_dir}/conninfo)
set_tests_properties(pg_cli PROPERTIES FIXTURES_REQUIRED pg_server RESOURCE_LOCK pg_server
  TIMEOUT 120 ENVIRONMENT "${WEIR_TEST_ENV}")

# weir worker and weir send (takeovers, fencing, 100 sessions on two
# workers, a server restart).  The tests on the server hold RESOURCE_LOCK
# pg_server: this one restarts it, and its workers claim any session
# needing a writer (it uses a database of its own, weir_worker, too).
add_test(NAME pg_worker COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/pg_worker.sh
         $<TARGET_FILE:weir_cli> ${_pg_dir}/conninfo ${_pg_dir})
set_tests_properties(pg_worker PROPERTIES FIXTURES_REQUIRED pg_server RESOURCE_LOCK pg_server
  TIMEOUT 400 ENVIRONMENT "${WEIR_TEST_ENV}")
