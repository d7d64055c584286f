//! The pool used for real against PostgreSQL (`cmap_testkit::postgres`,
//! the same checks every runtime runs) on tokio, through `tokio-postgres`
//! and the ready-made manager of `cmap-postgres` with its defaults
//! (`is_closed` on checkout, a rollback of an open transaction on
//! check-in). The checks that need the server run with `CMAP_PG_TESTS=1`.

mod common;

use cmap_tokio::TokioRuntime;
use common::block_on;

cmap_testkit::postgres_checks!(manager: cmap_postgres::PgManager, pool: TokioRuntime, tasks: TokioRuntime, block_on: block_on);
