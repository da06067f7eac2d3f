//! Pagination of lists: `limit`, `offset`, `total`, the bounds and bad values.

use cms_e2e::Server;
use cms_e2e::fixtures::{TENANTS, item_names, node_groups_path, tenant, total};

/// How many tenants the pagination test creates.
const TENANT_COUNT: usize = 25;

fn name(index: usize) -> String {
    format!("page-{index:02}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_by_limit_and_offset() {
    let server = Server::start().await;
    let api = server.api();

    // Created in reverse and concurrently, so only sorting can put them in order.
    let mut tasks = Vec::new();
    for index in (0..TENANT_COUNT).rev() {
        let api = api.clone();
        tasks.push(tokio::spawn(async move { api.post(TENANTS, &tenant(&name(index))).await.expect(201) }));
    }
    for task in tasks {
        task.await.expect("a create task does not panic");
    }
    let all: Vec<String> = (0..TENANT_COUNT).map(name).collect();

    let check = |query: &str, first: usize, count: usize| {
        let api = api.clone();
        let query = query.to_string();
        let expected = all[first..first + count].to_vec();
        async move {
            let list = api.get(&format!("{TENANTS}{query}")).await.expect(200);
            assert_eq!(item_names(&list), expected, "{query}");
            assert_eq!(total(&list), TENANT_COUNT as u64, "{query}: total counts every item");
        }
    };
    check("", 0, TENANT_COUNT).await;
    check("?limit=10", 0, 10).await;
    check("?limit=10&offset=10", 10, 10).await;
    check("?limit=10&offset=20", 20, 5).await;
    check("?offset=24", 24, 1).await;
    check("?offset=25", 25, 0).await;
    check("?offset=1000000", 25, 0).await;
    check("?limit=1", 0, 1).await;
    check("?limit=1&offset=7", 7, 1).await;
    check("?limit=1000", 0, TENANT_COUNT).await;
    check("?limit=1000&offset=0", 0, TENANT_COUNT).await;

    for query in [
        "limit=-1",
        "limit=x",
        "limit=0",
        "limit=1001",
        "limit=1.5",
        "limit=",
        "offset=-1",
        "offset=x",
        "offset=1.5",
        "limit=10&offset=-3",
    ] {
        let message = api.get(&format!("{TENANTS}?{query}")).await.expect_error(400, "BadRequest");
        let parameter =
            if query.starts_with("limit") && !query.contains("offset=-3") { "limit" } else { "offset" };
        assert!(message.contains(parameter), "{query}: the message names {parameter}: {message}");
    }

    // Every list endpoint pages the same way.
    api.get(&format!("{}?limit=0", node_groups_path("page-00"))).await.expect_error(400, "BadRequest");
    api.get("/api/v1/machines?offset=-1").await.expect_error(400, "BadRequest");
    let groups = api.get(&format!("{}?limit=1000&offset=3", node_groups_path("page-00"))).await.expect(200);
    assert_eq!(total(&groups), 0);
}
