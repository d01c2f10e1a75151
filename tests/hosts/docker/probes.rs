//! Docker's HEALTHCHECK and lastcall's /ready through a `docker stop`.

use super::*;

pub(crate) const CASES: &[Case] = cases![
    docker_healthcheck_goes_unhealthy_at_the_first_signal,
    docker_ready_is_503_during_the_pre_stop,
    docker_unready_on_stop_keeps_ready_through_the_pre_stop,
];

fn docker_healthcheck_goes_unhealthy_at_the_first_signal(hosts: &mut Hosts) {
    let docker = hosts.docker();
    docker.build(
        "lc-health",
        &format!(
            "FROM lc-entry\nENV LASTCALL_HEALTH_LISTEN=127.0.0.1:8081 LASTCALL_PRE_STOP=5s\n\
             HEALTHCHECK --interval=1s --timeout=2s --retries=1 CMD [\"/lastcall\", \"probe\", \"ready\"]\n\
             CMD [\"sh\", \"-c\", \"{}\"]\n",
            draining_app("0")
        ),
        &[],
    );
    let c = docker.run(&["--network", "none", "lc-health"]);
    let health = || c.inspect("{{.State.Health.Status}}");
    wait_until(30 * SEC, "healthy", || (health() == "healthy").then_some(()));
    let stopped_at = Instant::now();
    let stop = c.stop_in_background();
    wait_until(15 * SEC, "unhealthy", || (health() == "unhealthy").then_some(()));
    let unhealthy_after = stopped_at.elapsed();
    let log = c.logs(false);
    assert!(c.running() && !log.contains("app got TERM"), "unhealthy while the app still serves: {log}");
    assert!(unhealthy_after < Duration::from_millis(4900), "unhealthy {unhealthy_after:?} after docker stop, inside the 5 s pre-stop");
    let took = stop.join().unwrap();
    assert_eq!(c.exit_code(), 0, "{}", c.logs(false));
    assert!(took >= Duration::from_millis(4900), "the pre-stop held: {took:?}");
}

/// /ready on the container's loopback (the host network): 200, then 503 from `docker stop`
/// (or, with --unready-on stop, from the end of the pre-stop), while the app keeps running.
fn ready_during_the_pre_stop(hosts: &mut Hosts, unready_on: &str) {
    let docker = hosts.docker();
    let port = free_port();
    let listen = format!("LASTCALL_HEALTH_LISTEN=127.0.0.1:{port}");
    let unready = format!("LASTCALL_UNREADY_ON={unready_on}");
    let env = ["--network", "host", "-e", &listen, "-e", "LASTCALL_PRE_STOP=3s", "-e", &unready];
    let c = run_sh(docker, Mode::Entrypoint, &env, &draining_app("0"));
    wait_until(20 * SEC, "/ready 200", || (http_status(port, "/ready") == Some(200)).then_some(()));
    let stopped_at = Instant::now();
    let stop = c.stop_in_background();
    c.wait_log("received SIGTERM", 10 * SEC);
    let mut seen = Vec::new();
    while !c.logs(false).contains("app got TERM") && stopped_at.elapsed() < 10 * SEC {
        seen.push((stopped_at.elapsed(), http_status(port, "/ready"), http_status(port, "/live")));
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = stop.join().unwrap();
    assert_eq!(c.exit_code(), 0);
    assert!(took >= Duration::from_millis(2900), "{took:?}");
    let during: Vec<_> = seen.iter().filter(|(t, _, _)| *t > Duration::from_millis(300) && *t < Duration::from_millis(2700)).collect();
    assert!(during.len() >= 5, "{seen:?}");
    assert!(during.iter().all(|(_, _, live)| *live == Some(200)), "/live stays 200: {seen:?}");
    let expected = if unready_on == "stop" { 200 } else { 503 };
    assert!(during.iter().all(|(_, ready, _)| *ready == Some(expected)), "/ready during the pre-stop: {seen:?}");
}

fn docker_ready_is_503_during_the_pre_stop(hosts: &mut Hosts) {
    ready_during_the_pre_stop(hosts, "signal");
}

fn docker_unready_on_stop_keeps_ready_through_the_pre_stop(hosts: &mut Hosts) {
    ready_during_the_pre_stop(hosts, "stop");
}
