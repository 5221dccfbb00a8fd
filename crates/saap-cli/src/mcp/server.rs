//! The MCP side: initialize (name, version, instructions), `tools/list` from the tool table,
//! `tools/call` routed through it with the call's time bound, the output bound and the
//! client's cancellation; stdio transport.
//!
//! Must not print to stdout (the transport owns it) or turn a bad tool call into a protocol
//! error: only an unknown tool name is one (as the MCP specification says); everything else
//! is a tool result with `isError: true`.

use super::answer::cap;
use super::context::Context;
use super::table::{self, TOOLS};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;
use std::time::Instant;

/// What the server tells the client about itself: how to use the tools, in short.
const INSTRUCTIONS: &str = "saap's debugger for event-driven AI agents (SAAP dispatch rules R1-R6). Start from the symptom: `check` the agent (spec or Python source) for the static cause; `simulate`/`explore` to see the race or stall happen; `explain` for why a step fired twice or never (on a real run too: `run`); `report` for the whole diagnosis of a symptom in one answer. On a live system: `server_info`, `stream_list`, `stream_info`/`stream_subjects`, `runs`, `run_timeline`, `stream_view`/`stream_get`, `kv_ls`/`kv_get`. All tools are read-only; answers are JSON, cut at the server's output bound with a note saying how to page.";

/// The MCP server: the tool table over a fixed [`Context`].
#[derive(Clone)]
pub struct SaapMcp {
    ctx: Arc<Context>,
}

fn tool_of(def: &table::ToolDef) -> Tool {
    Tool::new(def.name, def.description, (def.schema)())
        .with_title(def.title)
        .with_annotations(
            ToolAnnotations::with_title(def.title)
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        )
}

impl SaapMcp {
    async fn answer(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(def) = table::find(&params.name) else {
            let known: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool is named `{}`; the tools are: {}",
                    params.name,
                    known.join(", ")
                ),
                None,
            ));
        };
        let ctx = &self.ctx;
        let started = Instant::now();
        let work = table::call(ctx, def, params.arguments);
        let bound = ctx.limits.call;
        let result = tokio::select! {
            r = tokio::time::timeout(bound, work) => match r {
                Ok(answer) => answer,
                // Dropping the call kills a child it started (kill_on_drop).
                Err(_) => Err(super::answer::ToolError::new(format!(
                    "`{}` did not finish within {}s and was stopped; {} Or restart the server with a larger --tool-timeout.",
                    def.name,
                    bound.as_secs(),
                    if def.narrow.is_empty() { "Narrow the call." } else { def.narrow }
                ))),
            },
            () = context.ct.cancelled() => Err(super::answer::ToolError::new("cancelled by the client")),
        };
        let ms = started.elapsed().as_millis() as u64;
        Ok(match result {
            Ok(text) => {
                let bytes = text.len();
                let text = cap(text, ctx.limits.max_output, def.narrow);
                tracing::info!(tool = def.name, ms, bytes, "answered");
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            Err(e) => {
                tracing::info!(tool = def.name, ms, "tool error");
                let text = cap(e.0, ctx.limits.max_output, "");
                CallToolResult::error(vec![ContentBlock::text(text)])
            }
        })
    }
}

impl ServerHandler for SaapMcp {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("saap", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("saap debugger".to_owned());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            TOOLS.iter().map(tool_of).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        table::find(name).map(tool_of)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.answer(request, context).await.map(Into::into)
    }
}

/// Serves the tools on stdin/stdout until the client closes the connection.
pub async fn serve(ctx: Context) -> anyhow::Result<()> {
    tracing::info!(
        root = %ctx.root.dir().display(),
        tools = TOOLS.len(),
        "saap mcp serving on stdio"
    );
    let server = SaapMcp { ctx: Arc::new(ctx) };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("the MCP session could not start: {e}"))?;
    let reason = running
        .waiting()
        .await
        .map_err(|e| anyhow::anyhow!("the MCP session failed: {e}"))?;
    tracing::info!(?reason, "saap mcp stopped");
    Ok(())
}
