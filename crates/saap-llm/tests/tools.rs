//! The tool loop against the in-process server scripted to call tools: typed tools run, bad
//! arguments and unknown tools are answered with the contract, failures with the message,
//! big results are cut with a marker, and the rounds are bounded.

mod support;

use std::time::Duration;

use saap_llm::schemars::JsonSchema;
use saap_llm::tools::{
    ExecutionStatus, Toolbox, run_tool_loop, run_tool_loop_streamed, typed_tool,
};
use saap_llm::{CancellationToken, ChatRequest, LlmClient, LlmConfig, Message, Role};
use serde::Deserialize;
use support::TestServer;

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "saap_llm::schemars")]
struct Weather {
    /// The city.
    city: String,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "saap_llm::schemars")]
struct Add {
    a: i64,
    b: i64,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "saap_llm::schemars")]
struct Nothing {}

fn toolbox() -> Toolbox {
    Toolbox::new()
        .with(typed_tool(
            "get_weather",
            "Current weather for a city",
            |w: Weather| async move { Ok::<_, String>(format!("Sunny in {}", w.city)) },
        ))
        .with(typed_tool(
            "add",
            "Adds two integers",
            |x: Add| async move { Ok::<_, String>(x.a + x.b) },
        ))
        .with(typed_tool(
            "big",
            "Returns a lot",
            |_: Nothing| async move { Ok::<_, String>("x".repeat(300 * 1024)) },
        ))
        .with(typed_tool(
            "fail",
            "Always fails",
            |_: Nothing| async move { Err::<String, _>("the database is down") },
        ))
}

fn client(server: &TestServer, scenario: &str) -> LlmClient {
    let mut config = LlmConfig::new(server.base_url(scenario)).with_model("test-model");
    config.request_timeout = Duration::from_secs(5);
    LlmClient::new(config).expect("client")
}

#[test]
fn schemas_come_from_the_argument_types() {
    let tools = toolbox();
    let spec = tools.spec("get_weather").expect("registered");
    assert_eq!(spec.schema["type"], "object");
    assert_eq!(spec.schema["properties"]["city"]["type"], "string");
    assert_eq!(spec.schema["required"][0], "city");
    assert!(spec.schema.get("$schema").is_none());
    let definitions = tools.definitions();
    assert_eq!(definitions.len(), 4);
    assert_eq!(definitions[0].kind, "function");
}

#[tokio::test]
async fn runs_tools_and_answers_bad_calls_with_the_contract() {
    let server = TestServer::start().await;
    let request = ChatRequest::new(vec![Message::user("Weather in Zürich, and 1+2?")]);
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        run_tool_loop(
            &client(&server, "agent"),
            &request,
            &toolbox(),
            4,
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("no hang")
    .expect("the loop finishes");

    assert_eq!(outcome.rounds, 2);
    assert_eq!(
        outcome.completion.message.content.as_deref(),
        Some("All done.")
    );
    let statuses: Vec<ExecutionStatus> = outcome.executions.iter().map(|e| e.status).collect();
    assert_eq!(
        statuses,
        [
            ExecutionStatus::Ok,
            ExecutionStatus::InvalidArguments,
            ExecutionStatus::UnknownTool,
            ExecutionStatus::Ok,
            ExecutionStatus::Failed,
            ExecutionStatus::Ok,
            ExecutionStatus::InvalidArguments,
        ]
    );
    let answers: Vec<&str> = outcome
        .executions
        .iter()
        .map(|e| e.answer.as_str())
        .collect();
    assert_eq!(answers[0], "Sunny in Zürich");
    assert!(
        answers[1].contains("do not match its contract"),
        "{}",
        answers[1]
    );
    assert!(
        answers[1].contains("invalid type: string \"one\""),
        "{}",
        answers[1]
    );
    assert!(
        answers[1].contains("tool `add`: Adds two integers"),
        "{}",
        answers[1]
    );
    assert!(
        answers[1].contains("\"required\":[\"a\",\"b\"]"),
        "{}",
        answers[1]
    );
    assert!(
        answers[2].contains("no tool named `launch_rockets`"),
        "{}",
        answers[2]
    );
    assert!(answers[2].contains("tool `get_weather`"), "{}", answers[2]);
    assert!(outcome.executions[3].cut);
    assert!(answers[3].len() < 256 * 1024 + 200);
    assert!(
        answers[3].ends_with("[saap: tool result cut: the first 262144 of 307200 bytes are shown]")
    );
    assert_eq!(
        answers[4],
        "Error: the tool `fail` failed: the database is down"
    );
    assert_eq!(answers[5], "3");
    assert!(
        answers[6].contains("key must be a string"),
        "{}",
        answers[6]
    );

    // The transcript: user, assistant with 7 calls, 7 tool answers, the final answer.
    assert_eq!(outcome.messages.len(), 10);
    assert_eq!(outcome.messages[2].role, Role::Tool);
    assert_eq!(outcome.messages[2].tool_call_id.as_deref(), Some("c1"));

    // What the server received in round 2: the tools offered, and every answer.
    let body = server.body("agent");
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(4));
    let tool_messages: Vec<&serde_json::Value> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 7);
    assert_eq!(tool_messages[5]["content"], "3");
    assert_eq!(tool_messages[5]["tool_call_id"], "c6");
}

#[tokio::test]
async fn streamed_loop_joins_split_calls_and_shows_the_text() {
    let server = TestServer::start().await;
    let request = ChatRequest::new(vec![Message::user("Weather in Zürich, and 1+2?")]);
    let mut shown = String::new();
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        run_tool_loop_streamed(
            &client(&server, "agent"),
            &request,
            &toolbox(),
            4,
            &CancellationToken::new(),
            |text| shown.push_str(text),
        ),
    )
    .await
    .expect("no hang")
    .expect("the loop finishes");
    assert_eq!(shown, "All done.");
    assert_eq!(outcome.rounds, 2);
    let answers: Vec<&str> = outcome
        .executions
        .iter()
        .map(|e| e.answer.as_str())
        .collect();
    assert_eq!(answers, ["Sunny in Zürich", "3"]);
    assert_eq!(server.body("agent")["stream"], true);
}

#[tokio::test]
async fn rounds_are_bounded() {
    let server = TestServer::start().await;
    let request = ChatRequest::new(vec![Message::user("loop")]);
    let error = run_tool_loop(
        &client(&server, "loop_forever"),
        &request,
        &toolbox(),
        3,
        &CancellationToken::new(),
    )
    .await
    .expect_err("the model never stops calling tools");
    assert_eq!(error.code(), "LLM_TOOL_ROUNDS_EXHAUSTED");
    assert!(error.to_string().contains("3 rounds"));
    assert_eq!(server.count("loop_forever"), 3);
}

#[tokio::test]
async fn a_slow_tool_times_out_and_is_answered() {
    #[derive(Deserialize, JsonSchema)]
    #[schemars(crate = "saap_llm::schemars")]
    struct Wait {}
    let tools = Toolbox::new()
        .timeout(Duration::from_millis(50))
        .with(typed_tool("wait", "Waits", |_: Wait| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, String>("late")
        }));
    let call = saap_llm::ToolCall {
        id: "w1".into(),
        kind: "function".into(),
        function: saap_llm::FunctionCall {
            name: "wait".into(),
            arguments: "{}".into(),
        },
    };
    let execution = tools.execute(&call, &CancellationToken::new()).await;
    assert_eq!(execution.status, ExecutionStatus::TimedOut);
    assert!(execution.answer.contains("did not finish within 0.05s"));
}

#[tokio::test]
async fn a_panicking_tool_is_answered_as_a_failure() {
    #[derive(Deserialize, JsonSchema)]
    #[schemars(crate = "saap_llm::schemars")]
    struct Boom {}
    let tools = Toolbox::new().with(typed_tool("boom", "Panics", |_: Boom| async move {
        if std::hint::black_box(true) {
            panic!("index out of range");
        }
        Ok::<_, String>("never")
    }));
    let call = saap_llm::ToolCall {
        id: "b1".into(),
        kind: "function".into(),
        function: saap_llm::FunctionCall {
            name: "boom".into(),
            arguments: "{}".into(),
        },
    };
    let execution = tools.execute(&call, &CancellationToken::new()).await;
    assert_eq!(execution.status, ExecutionStatus::Failed);
    assert!(
        execution.answer.contains("panicked: index out of range"),
        "{}",
        execution.answer
    );
}
