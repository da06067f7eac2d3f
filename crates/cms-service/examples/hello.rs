//! The benchmark baseline: a bare actix-web server with one `GET /hello`
//! handler, run with the same worker count as `cms-server`. It listens on
//! `CMS_LISTEN` (default `0.0.0.0:8080`) and prints `listening on <addr>`.

use std::net::SocketAddr;

use actix_web::{App, HttpServer, web};

async fn hello() -> &'static str {
    "hello"
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::var("CMS_LISTEN").unwrap_or_else(|_| "0.0.0.0:8080".to_string());
    let server = HttpServer::new(|| App::new().route("/hello", web::get().to(hello)))
        .workers(cms_service::worker_count())
        .bind(&listen)?;
    let addrs: Vec<String> = server.addrs().iter().map(SocketAddr::to_string).collect();
    announce(&addrs.join(", "));
    server.run().await
}

#[expect(clippy::print_stdout, reason = "the benchmark reads the bound address from standard output")]
fn announce(addrs: &str) {
    println!("listening on {addrs}");
}
