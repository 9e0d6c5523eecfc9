//! argos-bench-mcp: the MCP broker's figures beside their anchors, in one run.
//!
//! - P5: `tools/call` of server-everything's `echo` through the gateway's `/mcp` (→ mcpd →
//!   upstream) and through mcpd's gRPC `CallTool`, vs the same rmcp client straight to
//!   the upstream (all Streamable HTTP on loopback), interleaved: the p50 of each, their
//!   difference (goal ≤ 1 ms) and their ratio; then calls per second at concurrency 16,
//!   through `/mcp` and straight.
//! - P7: 100 servers configured at once, 10 of them hung (they accept a connection and
//!   never answer): the time until the other 90 serve (goal ≤ the per-server connect
//!   timeout + 1 s, whatever the hung ones do), and mcpd's memory then, as PSS.
//!
//! Needs root (the stack runs privilege-separated) and server-everything (installed by
//! `scripts/install-test-tools`). Run with `scripts/bench`.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use argos_proto::mcp::v1 as pb;
use argos_proto::mcp::v1::mcp_client::McpClient;
use argos_tests::StackBuilder;
use argos_tests::mcp_peer::Everything;
use argos_tests::measure::{median, pss_kib};
use rmcp::ServiceExt as _;

fn http(id: &str, url: &str, connect_timeout_ms: u32) -> pb::ServerConfig {
    pb::ServerConfig {
        id: id.into(),
        name: id.into(),
        transport: Some(pb::server_config::Transport::StreamableHttp(pb::Remote {
            url: url.into(),
            headers: Default::default(),
        })),
        enabled: true,
        local: true,
        connect_timeout_ms,
        ..Default::default()
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

async fn connected(c: &mut McpClient<tonic::transport::Channel>) -> usize {
    c.list_servers(pb::ListServersRequest {})
        .await
        .unwrap()
        .into_inner()
        .servers
        .iter()
        .filter(|s| s.state == pb::ServerState::Connected as i32)
        .count()
}

fn main() {
    argos_tests::answer_help(
        "usage: argos-bench-mcp [--calls N]\n  the MCP broker's call latency (vs a direct rmcp client) and its start with 100 servers, 10 hung",
    );
    let mut calls = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--calls", Some(n)) => calls = n.parse().expect("--calls N"),
            _ => {
                eprintln!("usage: argos-bench-mcp [--calls N]");
                std::process::exit(2);
            }
        }
    }
    argos_tests::require_root("the MCP broker benchmark");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stack = StackBuilder::new().start();
    let everything = Everything::start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tokens",
        serde_json::json!({"name": "bench", "scopes": ["mcp"]}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let token = r.json()["token"].as_str().unwrap().to_string();
    let endpoint = format!("http://{}/mcp", stack.listen);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = McpClient::new(argos_tests::channel(&stack.socket("mcpd")));

        // P5.
        c.add_server(pb::AddServerRequest {
            config: Some(http("everything", &everything.url(), 0)),
            validate_only: false,
        })
        .await
        .unwrap();
        while connected(&mut c).await < 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let direct = ()
            .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
                everything.url(),
            ))
            .await
            .expect("a direct rmcp client");
        let gateway = ()
            .serve(
                rmcp::transport::StreamableHttpClientTransport::from_config(
                    rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                        endpoint.as_str(),
                    )
                    .auth_header(token.clone()),
                ),
            )
            .await
            .expect("an rmcp client of /mcp");
        let era = |c: &rmcp::service::RunningService<rmcp::RoleClient, ()>| {
            c.peer_info()
                .map(|i| i.protocol_version.to_string())
                .unwrap_or_default()
        };
        let (gateway_era, direct_era) = (era(&gateway), era(&direct));
        let args: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"message": "benchmark"}"#).unwrap();
        let echo = |name: &'static str| {
            rmcp::model::CallToolRequestParams::new(name).with_arguments(args.clone())
        };
        let mut brokered = Vec::with_capacity(calls);
        let mut straight = Vec::with_capacity(calls);
        let mut through = Vec::with_capacity(calls);
        // Interleaved, so all see the same machine at the same moments.
        for i in 0..calls + 50 {
            let t = Instant::now();
            let r = gateway
                .call_tool(echo("mcp__everything__echo"))
                .await
                .unwrap();
            let g = t.elapsed().as_secs_f64() * 1000.0;
            assert_ne!(r.is_error, Some(true), "{r:?}");
            if i >= 50 {
                through.push(g);
            }
            let t = Instant::now();
            let r = c
                .call_tool(pb::CallToolRequest {
                    qualified_name: "mcp__everything__echo".into(),
                    arguments_json: r#"{"message": "benchmark"}"#.into(),
                    pinned_sha256: String::new(),
                })
                .await
                .unwrap()
                .into_inner();
            let b = t.elapsed().as_secs_f64() * 1000.0;
            assert!(!r.is_error);
            let t = Instant::now();
            let r = direct
                .call_tool(
                    rmcp::model::CallToolRequestParams::new("echo").with_arguments(args.clone()),
                )
                .await
                .unwrap();
            let d = t.elapsed().as_secs_f64() * 1000.0;
            assert_ne!(r.is_error, Some(true));
            if i >= 50 {
                brokered.push(b);
                straight.push(d);
            }
        }
        let (b50, d50, g50) = (
            median(&mut brokered),
            median(&mut straight),
            median(&mut through),
        );
        let (b99, d99, g99) = (
            percentile(&mut brokered, 0.99),
            percentile(&mut straight, 0.99),
            percentile(&mut through, 0.99),
        );
        println!("P5 tools/call of echo, {calls} calls each, interleaved (server-everything over Streamable HTTP on loopback)");
        println!("  protocol: rmcp client ↔ /mcp {gateway_era}, rmcp client ↔ server-everything {direct_era}");
        println!("  rmcp client → gateway /mcp → mcpd → upstream   p50 {g50:.3} ms   p99 {g99:.3} ms");
        println!("  mcpd's gRPC CallTool → upstream                p50 {b50:.3} ms   p99 {b99:.3} ms");
        println!("  rmcp client → upstream (anchor)                p50 {d50:.3} ms   p99 {d99:.3} ms");
        println!(
            "  /mcp: p50 delta {:.3} ms (goal ≤ 1 ms), ratio {:.2}×",
            g50 - d50,
            g50 / d50
        );
        println!(
            "  mcpd alone: p50 delta {:.3} ms, ratio {:.2}×",
            b50 - d50,
            b50 / d50
        );
        // Throughput at concurrency 16: one client each, 16 calls in flight.
        let rate = |client: std::sync::Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>,
                    name: &'static str| {
            let args = args.clone();
            async move {
                let per = (calls / 16).max(10);
                let t = Instant::now();
                let tasks: Vec<_> = (0..16)
                    .map(|_| {
                        let client = client.clone();
                        let args = args.clone();
                        tokio::spawn(async move {
                            for _ in 0..per {
                                let r = client
                                    .call_tool(
                                        rmcp::model::CallToolRequestParams::new(name)
                                            .with_arguments(args.clone()),
                                    )
                                    .await
                                    .unwrap();
                                assert_ne!(r.is_error, Some(true));
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
                (16 * per) as f64 / t.elapsed().as_secs_f64()
            }
        };
        let gateway = std::sync::Arc::new(gateway);
        let direct = std::sync::Arc::new(direct);
        let g_rate = rate(gateway.clone(), "mcp__everything__echo").await;
        let d_rate = rate(direct.clone(), "echo").await;
        println!("  at concurrency 16: /mcp {g_rate:.0} calls/s, straight (anchor) {d_rate:.0} calls/s, ratio {:.2}×", g_rate / d_rate);
        drop(direct);
        drop(gateway);

        // P7.
        let hung: Vec<std::net::TcpListener> = (0..10)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let hung_urls: Vec<String> = hung
            .iter()
            .map(|l| format!("http://127.0.0.1:{}/mcp", l.local_addr().unwrap().port()))
            .collect();
        let holders: Vec<_> = hung
            .into_iter()
            .map(|l| {
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for s in l.incoming() {
                        held.push(s);
                    }
                })
            })
            .collect();
        let timeout_ms = 20_000u32;
        let t = Instant::now();
        let mut adds = Vec::new();
        for i in 0..100 {
            let url = if i % 10 == 0 {
                hung_urls[i / 10].clone()
            } else {
                everything.url()
            };
            let mut c = c.clone();
            adds.push(tokio::spawn(async move {
                c.add_server(pb::AddServerRequest {
                    config: Some(http(&format!("s{i:03}"), &url, timeout_ms)),
                    validate_only: false,
                })
                .await
                .unwrap();
            }));
        }
        for a in adds {
            a.await.unwrap();
        }
        // Plus the P5 server, connected all along.
        while connected(&mut c).await < 91 {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the 90 did not connect"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let served = t.elapsed();
        let pid = argos_tests::probe(&stack.socket("mcpd"), None, None).json["pid"]
            .as_u64()
            .unwrap() as i32;
        let pss = pss_kib(pid);
        println!();
        println!("P7 100 servers added at once, 10 hung (connect timeout {timeout_ms} ms each)");
        println!(
            "  the other 90 serving after {:.3} s; anchor: the per-server timeout + 1 s = {:.1} s; ratio {:.3}×",
            served.as_secs_f64(),
            f64::from(timeout_ms) / 1000.0 + 1.0,
            served.as_secs_f64() / (f64::from(timeout_ms) / 1000.0 + 1.0)
        );
        println!(
            "  mcpd with 101 servers configured: PSS {:.1} MiB",
            pss as f64 / 1024.0
        );
        drop(holders);
    });
    stack.stop();
}
