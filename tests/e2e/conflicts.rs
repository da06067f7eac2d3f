//! Optimistic concurrency: stale versions, duplicate names, and races.

use cms_e2e::fixtures::{
    TENANTS, node_group, node_groups_path, resource_version, tenant, tenant_path, worker_group,
};
use cms_e2e::{Reply, Server};
use serde_json::json;

/// How many requests race in the concurrency tests.
const RACERS: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_versions_and_duplicate_names_conflict() {
    let server = Server::start().await;
    let api = server.api();
    let created = api.post(TENANTS, &tenant("epsilon")).await.expect(201);

    let mut first = created.clone();
    first["spec"]["kubernetesVersion"] = json!("1.31.2");
    let updated = api.put(&tenant_path("epsilon"), &first).await.expect(200);
    assert_eq!(resource_version(&updated), 2);

    // The same version again is now stale.
    let mut stale = created.clone();
    stale["spec"]["kubernetesVersion"] = json!("1.31.3");
    api.put(&tenant_path("epsilon"), &stale).await.expect_error(409, "Conflict");
    let current = api.get(&tenant_path("epsilon")).await.expect(200);
    assert_eq!(current, updated, "a conflicting PUT changes nothing");

    // So is a version from the future.
    let mut future = updated.clone();
    future["metadata"]["resourceVersion"] = json!(99);
    api.put(&tenant_path("epsilon"), &future).await.expect_error(409, "Conflict");

    // A duplicate tenant name conflicts and leaves the first tenant alone.
    let mut duplicate = tenant("epsilon");
    duplicate["spec"]["kubernetesVersion"] = json!("1.30.0");
    api.post(TENANTS, &duplicate).await.expect_error(409, "Conflict");
    assert_eq!(api.get(&tenant_path("epsilon")).await.expect(200), updated);

    // Node groups follow the same rule.
    let groups = node_groups_path("epsilon");
    let group = api.post(&groups, &node_group(worker_group("workers", 1, 1))).await.expect(201);
    let mut change = group.clone();
    change["spec"] = worker_group("workers", 2, 1);
    api.put(&format!("{groups}/workers"), &change).await.expect(200);
    api.put(&format!("{groups}/workers"), &change).await.expect_error(409, "Conflict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_puts_with_one_version_exactly_one_wins() {
    let server = Server::start().await;
    let api = server.api();
    let created = api.post(TENANTS, &tenant("zeta")).await.expect(201);
    assert_eq!(resource_version(&created), 1);

    let mut tasks = Vec::new();
    for racer in 0..RACERS {
        let api = api.clone();
        let mut body = created.clone();
        body["metadata"]["labels"] = json!({"racer": racer.to_string()});
        tasks.push(tokio::spawn(async move { api.put(&tenant_path("zeta"), &body).await }));
    }
    let replies = join(tasks).await;

    let winners: Vec<&Reply> = replies.iter().filter(|reply| reply.status == 200).collect();
    assert_eq!(winners.len(), 1, "exactly one PUT wins: {:?}", statuses(&replies));
    for reply in replies.iter().filter(|reply| reply.status != 200) {
        reply.expect_error(409, "Conflict");
    }
    let winner = winners[0].json();
    assert_eq!(resource_version(&winner), 2);
    let stored = api.get(&tenant_path("zeta")).await.expect(200);
    assert_eq!(stored, winner, "the stored tenant is the winner's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_creates_of_one_name_exactly_one_wins() {
    let server = Server::start().await;
    let api = server.api();

    let mut tasks = Vec::new();
    for racer in 0..RACERS {
        let api = api.clone();
        let mut body = tenant("eta");
        body["metadata"]["labels"] = json!({"racer": racer.to_string()});
        tasks.push(tokio::spawn(async move { api.post(TENANTS, &body).await }));
    }
    let replies = join(tasks).await;

    let winners: Vec<&Reply> = replies.iter().filter(|reply| reply.status == 201).collect();
    assert_eq!(winners.len(), 1, "exactly one POST creates: {:?}", statuses(&replies));
    for reply in replies.iter().filter(|reply| reply.status != 201) {
        reply.expect_error(409, "Conflict");
    }
    let stored = api.get(&tenant_path("eta")).await.expect(200);
    assert_eq!(stored, winners[0].json(), "the stored tenant is the winner's");
    assert_eq!(api.get(TENANTS).await.expect(200)["total"], 1);
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Reply>>) -> Vec<Reply> {
    let mut replies = Vec::new();
    for task in tasks {
        replies.push(task.await.expect("a request task does not panic"));
    }
    replies
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|reply| reply.status).collect()
}
