//! The write benchmark's baseline: a bare actix-web server whose one handler,
//! `POST /insert`, inserts the request body as one row into embedded SQLite
//! with sqlx, one transaction per request, durably: WAL and
//! `synchronous=FULL`, as the embedded store of `cms` runs, through a pool of
//! four connections, as it has. It runs with the same worker count as
//! `cms-server`, keeps its database in `CMS_DATA_DIR`, starts with
//! `CMS_PRELOAD_ROWS` rows in the table (default 0), listens on `CMS_LISTEN`
//! (default `0.0.0.0:8080`) and prints `listening on <addr>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sea_orm::sqlx::{Executor, SqlitePool};

/// The baseline's state: the pool and the next row name.
struct Rows {
    pool: SqlitePool,
    next: AtomicU64,
}

async fn insert(rows: web::Data<Rows>, body: web::Bytes) -> HttpResponse {
    let name = format!("row-{}", rows.next.fetch_add(1, Ordering::Relaxed));
    let inserted = sea_orm::sqlx::query("INSERT INTO rows (name, body) VALUES (?, ?)")
        .bind(name)
        .bind(String::from_utf8_lossy(&body).into_owned())
        .execute(&rows.pool)
        .await;
    match inserted {
        Ok(_) => HttpResponse::Created().finish(),
        Err(err) => HttpResponse::InternalServerError().body(err.to_string()),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::var("CMS_LISTEN").unwrap_or_else(|_| "0.0.0.0:8080".to_string());
    let data = PathBuf::from(std::env::var("CMS_DATA_DIR").unwrap_or_else(|_| ".".to_string()));
    let preload: u64 = std::env::var("CMS_PRELOAD_ROWS").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    let options = SqliteConnectOptions::new()
        .filename(data.join("insert.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await.map_err(other)?;
    pool.execute("CREATE TABLE IF NOT EXISTS rows (name TEXT PRIMARY KEY, body TEXT NOT NULL)")
        .await
        .map_err(other)?;
    let mut txn = pool.begin().await.map_err(other)?;
    for index in 0..preload {
        sea_orm::sqlx::query("INSERT INTO rows (name, body) VALUES (?, '{}')")
            .bind(format!("preloaded-{index}"))
            .execute(&mut *txn)
            .await
            .map_err(other)?;
    }
    txn.commit().await.map_err(other)?;
    let rows = web::Data::new(Rows { pool, next: AtomicU64::new(0) });
    let server =
        HttpServer::new(move || App::new().app_data(rows.clone()).route("/insert", web::post().to(insert)))
            .workers(cms_service::worker_count())
            .bind(&listen)?;
    let addrs: Vec<String> = server.addrs().iter().map(SocketAddr::to_string).collect();
    announce(&addrs.join(", "));
    server.run().await
}

fn other(err: sea_orm::sqlx::Error) -> std::io::Error {
    std::io::Error::other(err)
}

#[expect(clippy::print_stdout, reason = "the benchmark reads the bound address from standard output")]
fn announce(addrs: &str) {
    println!("listening on {addrs}");
}
