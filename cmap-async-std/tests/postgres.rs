//! The pool used for real against PostgreSQL (`cmap_testkit::postgres`,
//! the same checks every runtime runs) on `AsyncStdRuntime`, once under
//! async-std and once under smol, through `tokio-postgres` and the
//! ready-made manager of `cmap-postgres`. Its sockets need a tokio reactor:
//! `OnTokio` connects in the context of a small tokio runtime of the
//! testkit's, which drives the sessions; the queries run on the test's
//! runtime. The checks that need the server run with `CMAP_PG_TESTS=1`.

mod common;

mod on_async_std {
    use super::common::AsyncStdTasks;
    use cmap_async_std::AsyncStdRuntime;
    use cmap_testkit::postgres::OnTokio;

    cmap_testkit::postgres_checks!(manager: OnTokio<cmap_postgres::PgManager>, pool: AsyncStdRuntime, tasks: AsyncStdTasks, block_on: async_std::task::block_on);
}

mod on_smol {
    use super::common::SmolTasks;
    use cmap_async_std::AsyncStdRuntime;
    use cmap_testkit::postgres::OnTokio;

    cmap_testkit::postgres_checks!(manager: OnTokio<cmap_postgres::PgManager>, pool: AsyncStdRuntime, tasks: SmolTasks, block_on: smol::block_on);
}
