//! The headline's choice among blockers, and the bounds of messages.

use super::*;

fn trouble(machine: &str, fault: Fault, cause: &str) -> Trouble {
    Trouble { machine: machine.into(), fault, cause: cause.into() }
}

fn refused(machine: &str, host: u8) -> Trouble {
    let cause = format!("could not connect to 10.0.0.{host}:50000: connection refused");
    trouble(machine, Fault::Unreachable, &cause)
}

#[test]
fn the_first_gate_wins_whatever_the_order_blockers_came_in() {
    let mut blockers = Blockers::default();
    assert_eq!(blockers.headline(), None, "nothing blocks");
    blockers.add(Gate::Nodes, "1 of 3 nodes not Ready");
    blockers.add(Gate::KubernetesApi, "the Kubernetes API server is not ready");
    blockers.add(Gate::Etcd, "etcd is not healthy");
    assert_eq!(blockers.headline().as_deref(), Some("etcd is not healthy"));
    blockers.add(Gate::Bootstrap, "etcd is not bootstrapped yet");
    blockers.add(Gate::MachinesStarting, "starting");
    blockers.add(Gate::Rollout, "rolling out");
    blockers.add(Gate::Leaving, "machines leaving");
    assert_eq!(blockers.headline().as_deref(), Some("machines leaving"));
    blockers.add(Gate::Machines, "4 of 4 machines unreachable");
    blockers.add(Gate::Machines, "a second text for the same gate does not replace the first");
    assert_eq!(blockers.headline().as_deref(), Some("4 of 4 machines unreachable"));
    blockers.add(Gate::MachinesOff, "machines off");
    blockers.add(Gate::RolloutPaused, "the rollout is paused");
    assert_eq!(blockers.headline().as_deref(), Some("the rollout is paused"));
}

#[test]
fn unreachable_hosts_name_the_count_the_first_and_what_to_do() {
    let troubles =
        [refused("cp-0", 1), refused("workers-0", 2), refused("workers-1", 3), refused("workers-2", 4)];
    let (check, blockers) = machines(0, 4, &troubles);
    assert!(!check.ok);
    assert_eq!(check.reason, "Unreachable");
    assert_eq!(
        check.message,
        "0 of 4 machines ready; 4 unreachable: cp-0 (could not connect to 10.0.0.1:50000: connection refused), \
         workers-0 (could not connect to 10.0.0.2:50000: connection refused), \
         workers-1 (could not connect to 10.0.0.3:50000: connection refused) and 1 more"
    );
    assert_eq!(blockers.len(), 1);
    assert_eq!(blockers[0].0, Gate::Machines);
    assert_eq!(
        blockers[0].1,
        "4 of 4 machines unreachable: cp-0: could not connect to 10.0.0.1:50000: connection refused \
         (and 3 more); check that the hosts are powered on and reachable from the service"
    );
}

#[test]
fn the_worst_fault_leads_and_the_others_are_counted() {
    let troubles = [
        trouble("workers-1", Fault::Kubernetes, "node talos-workers-1 is NotReady: KubeletNotReady"),
        trouble("workers-0", Fault::Starting, "not answering yet: 10.0.0.2:50000 stalled"),
        trouble("cp-1", Fault::Config, "applying the machine config: 10.0.0.5:50000 answered: invalid"),
        trouble("cp-0", Fault::Off, "could not connect to 10.0.0.1:50000: connection refused"),
    ];
    let (check, blockers) = machines(1, 5, &troubles);
    assert_eq!(check.reason, "Off");
    assert_eq!(
        check.message,
        "1 of 5 machines ready; 1 off, not answering the node API: \
         cp-0 (could not connect to 10.0.0.1:50000: connection refused); 3 more not ready"
    );
    let gates: Vec<Gate> = blockers.iter().map(|(gate, _)| *gate).collect();
    assert_eq!(gates, [Gate::MachinesOff, Gate::Machines, Gate::MachinesStarting, Gate::Nodes]);
    assert!(blockers[1].1.starts_with("1 of 5 machines without their config: cp-1: "), "{}", blockers[1].1);
    assert!(blockers[1].1.ends_with("; see each machine's message"), "{}", blockers[1].1);

    let (check, blockers) = machines(3, 3, &[]);
    assert!(check.ok && blockers.is_empty());
    assert_eq!(check.message, "3 of 3 machines ready");
}

#[test]
fn messages_are_one_bounded_line_and_the_hint_survives() {
    let long = format!("line one\nline two\twith a tab\r\n{}", "x".repeat(1000));
    let line = one_line(&long, 50);
    assert_eq!(line.chars().count(), 50, "{line}");
    assert!(line.starts_with("line one line two with a tab x") && line.ends_with("..."), "{line}");
    assert_eq!(one_line("  short  enough ", 50), "short enough");
    assert_eq!(one_line("é".repeat(60).as_str(), 10), format!("{}...", "é".repeat(7)));

    let text = with_hint(&"y".repeat(1000), Some("check the hosts"));
    assert_eq!(text.chars().count(), MESSAGE_LIMIT, "{text}");
    assert!(text.ends_with("...; check the hosts"), "{text}");

    // A hundred machines with long causes still make one bounded sentence.
    let many: Vec<Trouble> = (0..100).map(|i| refused(&format!("workers-{i:02}"), i)).collect();
    let (check, blockers) = machines(0, 100, &many);
    assert!(check.message.chars().count() <= CONDITION_LIMIT, "{}", check.message);
    assert!(check.message.ends_with(" and 97 more"), "{}", check.message);
    assert!(blockers[0].1.chars().count() <= MESSAGE_LIMIT, "{}", blockers[0].1);
    assert!(blockers[0].1.contains("(and 99 more)"), "{}", blockers[0].1);
    let noisy = trouble("cp-0", Fault::Config, &format!("applying the machine config: {}", "z".repeat(500)));
    let (check, _) = machines(0, 1, &[noisy]);
    assert!(check.message.chars().count() <= CONDITION_LIMIT, "{}", check.message);
}

#[test]
fn lists_name_the_first_few_and_count_the_rest() {
    let names = |n: usize| (0..n).map(|i| format!("m-{i}")).collect::<Vec<_>>();
    assert_eq!(listed(&names(0)), "");
    assert_eq!(listed(&names(2)), "m-0, m-1");
    assert_eq!(listed(&names(3)), "m-0, m-1, m-2");
    assert_eq!(listed(&names(5)), "m-0, m-1, m-2 and 2 more");
}

#[test]
fn a_tool_failure_is_shortened_to_its_diagnostic() {
    let output = "retrying: tofu apply failed (exit status: 1): ...ces ╷ │ Error: Invalid provider configuration \
                  │ │ Provider \"registry.opentofu.org/oracle/oci\" requires explicit configuration. ╵";
    assert_eq!(
        tool_failure(output),
        "retrying: the provisioning tool failed: Invalid provider configuration; its output is in the \
         Provisioned condition"
    );
    let plain = "tofu apply timed out after 6s and was killed";
    assert_eq!(tool_failure(plain), plain);
    assert!(tool_failure(&"q".repeat(5000)).chars().count() <= MESSAGE_LIMIT);
}
