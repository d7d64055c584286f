//! The pool used for real against PostgreSQL (`cmap_testkit::postgres`,
//! the same checks every runtime runs) on threads, through the synchronous
//! `postgres` crate and the ready-made manager of `cmap-postgres`,
//! wrapped as `cmap_blocking::Pool` wraps it: the async pool on
//! `ThreadRuntime`, each test body in `block_on` and its tasks on worker
//! threads. The checks that need the server run with `CMAP_PG_TESTS=1`.

use cmap_blocking::{block_on, SyncManager, ThreadRuntime};
use cmap_postgres::blocking::PgManager;

cmap_testkit::postgres_checks!(manager: SyncManager<PgManager>, pool: ThreadRuntime, tasks: ThreadRuntime, block_on: block_on);
