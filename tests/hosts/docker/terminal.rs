//! `docker run -it` through a pty: Ctrl-C reaches the app (as root or as another user), and a
//! shell gets its prompt back.

use super::*;

pub(crate) const CASES: &[Case] = cases![
    docker_run_it_ctrl_c_reaches_the_app,
    docker_run_it_sh_gets_its_prompt_back,
    docker_run_it_ctrl_c_reaches_an_app_as_another_user,
];

/// Drives `docker run -it ...` through a pty (tests/hosts/pty-session) and returns its
/// transcript and exit code.
fn pty_session(docker: &Docker, run_args: &[&str], steps: &str) -> (String, i32) {
    let mut cmd = Command::new("python3");
    cmd.arg(repo().join("tests/hosts/pty-session")).arg(steps).arg("--").arg(CLIENT).arg("-H").arg(docker.host());
    cmd.args(["run", "-it", "--rm", "--network", "none"]).args(run_args);
    let out = output(&mut cmd, 60 * SEC);
    let transcript = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (transcript, out.status.code().unwrap_or(-1))
}

fn docker_run_it_ctrl_c_reaches_the_app(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        let mut args = mode.image().to_vec();
        args.extend(["sh", "-c", "trap 'echo app got INT; exit 7' INT; echo app ready; while :; do sleep 1; done"]);
        let (transcript, code) = pty_session(docker, &args, r#"[["expect", "app ready"], ["send", "\u0003"], ["expect", "app got INT"], ["eof"]]"#);
        assert_eq!(code, 7, "{mode:?}: the app's own exit, not a shutdown:\n{transcript}");
        assert!(!transcript.contains("received SIGINT"), "{mode:?}: Ctrl-C went to the app, not to lastcall:\n{transcript}");
    }
}

/// `docker run -it` with LASTCALL_USER: the app, no longer root, still owns the terminal's
/// foreground, so Ctrl-C reaches it and not lastcall.
fn docker_run_it_ctrl_c_reaches_an_app_as_another_user(hosts: &mut Hosts) {
    let docker = hosts.docker();
    let args = ["-e", "LASTCALL_USER=65534:65534", "lc-entry", "sh", "-c",
                "trap 'echo app got INT as $(id -u); exit 7' INT; echo app ready; while :; do sleep 1; done"];
    let (transcript, code) = pty_session(docker, &args, r#"[["expect", "app ready"], ["send", "\u0003"], ["expect", "app got INT as 65534"], ["eof"]]"#);
    assert_eq!(code, 7, "the app's own exit, not a shutdown:\n{transcript}");
    assert!(!transcript.contains("received SIGINT"), "Ctrl-C went to the app, not to lastcall:\n{transcript}");
}

/// `docker run -it IMAGE sh`: the shell puts its job in the terminal's foreground, so Ctrl-C
/// reaches the job (a `sleep` loop) and not the shell, which gets its prompt back.
fn docker_run_it_sh_gets_its_prompt_back(hosts: &mut Hosts) {
    let docker = hosts.docker();
    for mode in MODES {
        let mut args = mode.image().to_vec();
        args.extend(["sh"]);
        // Each of the two says when it gets INT. The job exits 7 from its trap rather than dying
        // of the signal: a shell whose job died of SIGINT raises SIGINT on itself (ash and dash
        // do), which would fire the shell's trap though the terminal never sent it there. The
        // job says when it runs, so Ctrl-C is typed then, not after a pause. Each marker is
        // computed ($((40+2))) so that the terminal's echo of the typed line cannot match it.
        let steps = r##"[["expect", "# "], ["send", "trap 'echo shell-got-INT-$((40+2))' INT\r"], ["expect", "# "],
                        ["send", "sh -c 'trap \"echo job-got-INT-\\$((40+2)); exit 7\" INT; echo job-ready-$((40+2)); while :; do sleep 1; done'\r"],
                        ["expect", "job-ready-42"], ["send", "\u0003"], ["expect", "# "],
                        ["send", "echo job-status-$?; echo alive-$((20+22))\r"], ["expect", "alive-42"],
                        ["send", "exit 5\r"], ["eof"]]"##;
        let (transcript, code) = pty_session(docker, &args, steps);
        assert_eq!(code, 5, "{mode:?}:\n{transcript}");
        assert!(transcript.contains("job-got-INT-42"), "{mode:?}: Ctrl-C did not reach the foreground job:\n{transcript}");
        assert!(transcript.contains("job-status-7"), "{mode:?}: the job did not end by its own INT trap:\n{transcript}");
        assert!(!transcript.contains("shell-got-INT-42"), "{mode:?}: Ctrl-C reached the shell too, not only its job:\n{transcript}");
    }
}
