//! The watch fan-out baseline: a bare actix-web server that forwards one
//! `tokio::sync::broadcast` channel to every client of `GET /watch` as
//! server-sent events, and nothing else (no authentication, no store).
//! `PUT /frame` broadcasts its body, as it is, as one frame to every watcher
//! and answers how many watchers it reached; a new watcher first gets
//! `id: 0` and a blank line, as a `cms` watch says it is in sync. Run with the
//! same worker count as `cms-server`, it listens on `CMS_LISTEN` (default
//! `0.0.0.0:8080`) and prints `listening on <addr>`.

use std::convert::Infallible;
use std::net::SocketAddr;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{App, HttpResponse, HttpServer, web};
use bytes::Bytes;
use tokio::sync::broadcast;

/// Frames a watcher may fall behind by before it misses some.
const CAPACITY: usize = 64;

type Frames = web::Data<broadcast::Sender<Bytes>>;

async fn watch(frames: Frames) -> HttpResponse {
    let mut receiver = frames.subscribe();
    let stream = async_stream::stream! {
        yield Ok::<_, Infallible>(Bytes::from_static(b"id: 0\n\n"));
        loop {
            match receiver.recv().await {
                Ok(frame) => yield Ok(frame),
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    };
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "text/event-stream"))
        .insert_header((CACHE_CONTROL, "no-cache"))
        .insert_header(("x-accel-buffering", "no"))
        .streaming(stream)
}

async fn frame(frames: Frames, body: Bytes) -> String {
    frames.send(body).unwrap_or(0).to_string()
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::var("CMS_LISTEN").unwrap_or_else(|_| "0.0.0.0:8080".to_string());
    let frames = web::Data::new(broadcast::channel::<Bytes>(CAPACITY).0);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(frames.clone())
            .route("/watch", web::get().to(watch))
            .route("/frame", web::put().to(frame))
    })
    .workers(cms_service::worker_count())
    // Open watches never end by themselves: stop soon after SIGTERM.
    .shutdown_timeout(1)
    .bind(&listen)?;
    let addrs: Vec<String> = server.addrs().iter().map(SocketAddr::to_string).collect();
    announce(&addrs.join(", "));
    server.run().await
}

#[expect(clippy::print_stdout, reason = "the benchmark reads the bound address from standard output")]
fn announce(addrs: &str) {
    println!("listening on {addrs}");
}
