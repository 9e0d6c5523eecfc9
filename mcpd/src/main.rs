//! argos-mcpd: the MCP broker: upstream MCP servers, qualified tools, caps and pins.
//!
//! So far its surface is what the daemon skeleton gives every socket (`Status`, health,
//! reflection) and its own, still empty, service; see ARCHITECTURE.md for what lands here
//! next.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_common::peer::MethodPolicy;
use argos_proto::mcp::v1::mcp_server::{Mcp, McpServer};

struct McpService;

impl Mcp for McpService {}

fn main() -> ExitCode {
    daemon::run(Spec::new("mcpd", Privilege::Unprivileged), |_ctx| async {
        Ok(Serve::new(McpServer::new(McpService), MethodPolicy::new()))
    })
}
