//! r2d2_sqlite's manager on cmap-blocking through `compat::R2d2`, on a
//! file database (no server): its `with_init` pragmas hook puts every
//! connection in WAL mode, and what one connection writes another reads.

use std::time::Duration;

use cmap_blocking::compat::R2d2;
use cmap_blocking::Pool;
use r2d2_sqlite::SqliteConnectionManager;

#[test]
fn a_file_database_in_wal_mode_serves_several_connections() {
    let dir = std::env::temp_dir().join(format!("cmap-compat-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("test.db");
    let _ = std::fs::remove_file(&file);
    let manager = SqliteConnectionManager::file(&file)
        .with_init(|c| c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;"));
    let pool = Pool::builder()
        .address(file.to_string_lossy().as_ref())
        .max_pool_size(2)
        .wait_queue_timeout(Duration::from_secs(5))
        .build(R2d2::new(manager))
        .unwrap();

    let writer = pool.get().unwrap();
    let mode: String = writer
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "the init hook ran on the connection");
    writer
        .execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (41), (1);")
        .unwrap();
    // A second connection, while the first is still out.
    let reader = pool.get().unwrap();
    let sum: i64 = reader
        .query_row("SELECT sum(n) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(sum, 42);
    assert_eq!(pool.status().in_use, 2);
    drop((writer, reader));
    assert_eq!(pool.status().available, 2);
    drop(pool);
    std::fs::remove_dir_all(&dir).unwrap();
}
