//! A tool-using agent (issue 20 §6), written with `#[agent]`: one step asks the model with a
//! typed tool (`weather`, its JSON Schema generated from [`WeatherArgs`]) and runs the tool
//! loop inside the step (`Llm::chat_with_tools`): each tool call the model makes is executed
//! and answered, at most four model calls; every model call comes back as an `LLMEvent` and
//! every tool call as a `ToolEvent`, returned with the answer so the run's trace shows them.
//!
//! The model: `OPENAI_BASE_URL` (+ `OPENAI_API_KEY`, `OPENAI_MODEL`) when set — it must
//! support tool calls — else a scripted model behind a real OpenAI-compatible endpoint on
//! loopback that calls `weather` for the city in the question, then answers from the tool's
//! result. The forecasts are a fixed table: no network.

use saap::llm::scripted::{ScriptedReply, ScriptedRequest, ScriptedServer};
use saap::llm::{ChatRequest, Llm, LlmClient, Message, Toolbox, typed_tool};
use saap::semantic::{LLMEvent, ToolEvent};
use saap::{Agent, Required, Res, StepCtx, StepError, UserMessageEvent, Workflow, agent};
use std::sync::OnceLock;

/// The scripted model's name.
pub const SCRIPTED_MODEL: &str = "scripted-weather";

/// The `weather` tool's arguments (its JSON Schema is generated from this type).
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct WeatherArgs {
    /// The city, e.g. "Bern".
    pub city: String,
}

/// Today's forecast for a city, from a fixed table.
pub fn forecast(city: &str) -> Result<String, String> {
    match city.trim().to_lowercase().as_str() {
        "bern" => Ok("Bern: sunny, 21 °C".into()),
        "zurich" | "zürich" => Ok("Zurich: light rain, 17 °C".into()),
        "geneva" => Ok("Geneva: cloudy, 19 °C".into()),
        other => Err(format!(
            "no forecast for `{other}`: the table has Bern, Zurich and Geneva"
        )),
    }
}

/// The agent's tools.
pub fn toolbox() -> Toolbox {
    Toolbox::new().with(typed_tool(
        "weather",
        "Today's weather forecast for a Swiss city",
        |a: WeatherArgs| async move { forecast(&a.city) },
    ))
}

/// The answer; ends the run.
#[derive(saap::Event, serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
#[event(parent = saap::StopEvent)]
pub struct Forecast {
    pub text: String,
}

/// What the step returns: every model call, every tool call, then the answer.
// A few values once per run: boxing the large ones would only add allocations.
#[allow(clippy::large_enum_variant)]
#[derive(saap::EventUnion, Debug)]
pub enum Recorded {
    Call(LLMEvent),
    Tool(ToolEvent),
    Answer(Forecast),
}

/// The weather agent: `answer` runs the tool loop.
pub struct WeatherAgent;

#[agent]
impl WeatherAgent {
    #[step]
    async fn answer(
        q: Required<UserMessageEvent>,
        llm: Res<Llm>,
        tools: Res<Toolbox>,
        ctx: StepCtx,
    ) -> Result<Vec<Recorded>, StepError> {
        let request = ChatRequest::new(vec![
            Message::system("Use the weather tool for forecasts; answer in one sentence."),
            Message::user(q.message.clone()),
        ]);
        let done = llm
            .chat_with_tools(&ctx, &request, &tools, 4)
            .await
            .map_err(|e| StepError::new(e.to_string()))?;
        let text = done.text().to_string();
        let mut out: Vec<Recorded> = done.calls.into_iter().map(Recorded::Call).collect();
        out.extend(done.tools.into_iter().map(Recorded::Tool));
        out.push(Recorded::Answer(Forecast { text }));
        Ok(out)
    }
}

/// The scripted model: asks `weather` for the capitalized word after "in", then answers
/// with what the tool said.
fn scripted(request: &ScriptedRequest) -> ScriptedReply {
    if let Some(result) = request.last("tool") {
        return ScriptedReply::Text(format!("Today's forecast: {result}."));
    }
    let question = request.last("user").unwrap_or_default();
    let city = question
        .split_whitespace()
        .skip_while(|w| *w != "in")
        .nth(1)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .unwrap_or("Bern");
    ScriptedReply::ToolCall {
        name: "weather".into(),
        arguments: serde_json::json!({ "city": city }),
    }
}

/// The model of `OPENAI_BASE_URL` when set, else the scripted model (started once per
/// process, on loopback).
pub fn model_from_env() -> Result<Llm, String> {
    if std::env::var_os("OPENAI_BASE_URL").is_some_and(|v| !v.is_empty()) {
        return Llm::from_env().map_err(|e| e.to_string());
    }
    static SCRIPTED: OnceLock<Result<ScriptedServer, String>> = OnceLock::new();
    let server = SCRIPTED
        .get_or_init(|| {
            ScriptedServer::start(SCRIPTED_MODEL, scripted)
                .map_err(|e| format!("the scripted model cannot start on loopback: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)?;
    LlmClient::new(server.config())
        .map(|client| Llm::new(client).with_provider("scripted"))
        .map_err(|e| e.to_string())
}

/// The agent with its model and tools.
pub fn workflow() -> Result<Workflow, String> {
    Ok(WeatherAgent::workflow()
        .map_err(|e| e.to_string())?
        .with_resource(model_from_env()?)
        .with_resource(toolbox()))
}
