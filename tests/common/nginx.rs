//! The one nginx configuration the tests use: the 502 experiment's proxy in front of the app.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

/// Writes `dir`/nginx.conf: nginx in the foreground, proxying 127.0.0.1:`port` to the app on
/// `upstream`, the way the experiment did. nginx keeps its pid and temporary files in `var`, a
/// path as nginx sees it (inside the container, under Docker); with `logs` its logs go there
/// too, else errors go to stderr and nothing is logged per request.
pub fn proxy_config(dir: &Path, var: &str, logs: bool, port: u16, upstream: u16) -> PathBuf {
    let conf = dir.join("nginx.conf");
    let (error_log, access_log) = if logs {
        (format!("{var}/nginx-error.log"), format!("{var}/nginx-access.log"))
    } else {
        ("/dev/stderr".to_string(), "off".to_string())
    };
    fs::write(
        &conf,
        format!(
            "daemon off;
master_process on;
worker_processes 1;
pid {var}/nginx.pid;
error_log {error_log} info;
events {{ worker_connections 256; }}
http {{
  access_log {access_log};
  client_body_temp_path {var}/body;
  proxy_temp_path {var}/proxy;
  fastcgi_temp_path {var}/fastcgi;
  uwsgi_temp_path {var}/uwsgi;
  scgi_temp_path {var}/scgi;
  upstream app {{ server 127.0.0.1:{upstream} max_fails=0; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://app;
      proxy_next_upstream off;
      proxy_connect_timeout 1s;
      proxy_read_timeout 30s;
    }}
  }}
}}
"
        ),
    )
    .unwrap();
    conf
}
