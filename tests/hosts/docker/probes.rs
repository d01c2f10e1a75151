//! Docker's HEALTHCHECK and lastcall's /ready through a `docker stop`.

use super::*;

pub(crate) const CASES: &[Case] = cases![
    docker_healthcheck_goes_unhealthy_at_the_first_signal,
    docker_ready_is_503_during_the_pre_stop,
    docker_unready_on_stop_keeps_ready_through_the_pre_stop,
];

fn docker_healthcheck_goes_unhealthy_at_the_first_signal(hosts: &mut Hosts) {
    let docker = hosts.docker();
    // A 30 s pre-stop (and a docker stop that waits for it): the window in which Docker's 1 s
    // probe must see /ready go and the test see it with the app untouched is far longer than
    // that takes. The test cuts it short with a second TERM once it has seen it.
    docker.build(
        "lc-health",
        &format!(
            "FROM lc-entry\nENV LASTCALL_HEALTH_LISTEN=127.0.0.1:8081 LASTCALL_PRE_STOP=30s\n\
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
    let stop = c.stop_in_background_with(Some(60));
    wait_until(60 * SEC, "unhealthy", || (health() == "unhealthy").then_some(()));
    let unhealthy_after = stopped_at.elapsed();
    let log = c.logs(false);
    // On events, not the clock: unhealthy while the pre-stop still ran, the app untouched.
    assert!(
        c.running() && log.contains("pre-stop: the app keeps running") && !log.contains("pre-stop ended") && !log.contains("app got TERM"),
        "unhealthy {unhealthy_after:?} after docker stop, while the app still serves: {log}"
    );
    docker.ok(&["kill", "-s", "TERM", &c.name]);
    let took = stop.join().unwrap();
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    // The pre-stop held until the test ended it: Docker's TERM, then the test's.
    assert_eq!(log.matches("received SIGTERM").count(), 2, "{log}");
    assert_timeline_once(&log, &["pre-stop: the app keeps running for 30.000s", "pre-stop cut short", "forwarded SIGTERM", "child exited with status 0"]);
    assert!(!log.contains("pre-stop ended"), "{took:?}: {log}");
}

/// /ready on the container's loopback (the host network): 200, then 503 from `docker stop`
/// (or, with --unready-on stop, from the end of the pre-stop), while the app keeps running.
fn ready_during_the_pre_stop(hosts: &mut Hosts, unready_on: &str) {
    let docker = hosts.docker();
    let port = free_port();
    let listen = format!("LASTCALL_HEALTH_LISTEN=127.0.0.1:{port}");
    let unready = format!("LASTCALL_UNREADY_ON={unready_on}");
    const PRE_STOP: Duration = Duration::from_secs(5);
    let env = ["--network", "host", "-e", &listen, "-e", "LASTCALL_PRE_STOP=5s", "-e", &unready];
    let c = run_sh(docker, Mode::Entrypoint, &env, &draining_app("0"));
    wait_until(20 * SEC, "/ready 200", || (http_status(port, "/ready") == Some(200)).then_some(()));
    let stopped_at = Instant::now();
    let stop = c.stop_in_background();
    c.wait_log("received SIGTERM", 10 * SEC);
    // Samples from once lastcall has the TERM until PRE_STOP after the stop was sent: each of
    // them ends inside the pre-stop, whatever the latencies, which began after `stopped_at`.
    let mut during = Vec::new();
    loop {
        let sample = (http_status(port, "/ready"), http_status(port, "/live"));
        if stopped_at.elapsed() >= PRE_STOP {
            break;
        }
        during.push(sample);
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = stop.join().unwrap();
    let log = c.logs(false);
    assert_eq!(c.exit_code(), 0, "{log}");
    assert!(took >= PRE_STOP - Duration::from_millis(100), "{took:?}");
    // About forty: three is enough to say it stays so, and room for a slow host.
    assert!(during.len() >= 3, "{during:?}\n{log}");
    assert!(during.iter().all(|(_, live)| *live == Some(200)), "/live stays 200: {during:?}");
    let expected = if unready_on == "stop" { 200 } else { 503 };
    assert!(during.iter().all(|(ready, _)| *ready == Some(expected)), "/ready during the pre-stop: {during:?}");
}

fn docker_ready_is_503_during_the_pre_stop(hosts: &mut Hosts) {
    ready_during_the_pre_stop(hosts, "signal");
}

fn docker_unready_on_stop_keeps_ready_through_the_pre_stop(hosts: &mut Hosts) {
    ready_during_the_pre_stop(hosts, "stop");
}
