//! The scripted model (`saap_llm::scripted`) through the real client: streamed and whole
//! answers, usage counted in words, a tool call the client assembles, what the script sees
//! of a request, and a body that is not JSON refused with a 400 the client reports.
#![allow(clippy::unwrap_used)]

use saap_llm::scripted::{ScriptedReply, ScriptedRequest, ScriptedServer};
use saap_llm::{CancellationToken, ChatRequest, LlmClient, Message};
use std::sync::{Arc, Mutex};

fn echo(seen: Arc<Mutex<Vec<ScriptedRequest>>>) -> ScriptedServer {
    ScriptedServer::start("scripted-test", move |r: &ScriptedRequest| {
        seen.lock().unwrap().push(r.clone());
        if r.tools.iter().any(|t| t == "weather") && r.last("tool").is_none() {
            return ScriptedReply::ToolCall {
                name: "weather".into(),
                arguments: serde_json::json!({"city": "Bern"}),
            };
        }
        ScriptedReply::Text(format!("You said: {}", r.last("user").unwrap_or_default()))
    })
    .unwrap()
}

#[tokio::test]
async fn a_streamed_answer_arrives_word_by_word_with_usage_in_words() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = echo(seen.clone());
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    let client = LlmClient::new(server.config()).unwrap();
    let request = ChatRequest::new(vec![
        Message::system("be brief"),
        Message::user("hello there model"),
    ]);
    let mut pieces = Vec::new();
    let done = client
        .stream(&request, CancellationToken::new())
        .await
        .unwrap()
        .collect(|t| pieces.push(t.to_string()))
        .await
        .unwrap();
    assert_eq!(pieces, ["You ", "said: ", "hello ", "there ", "model"]);
    assert_eq!(
        done.message.content.as_deref(),
        Some("You said: hello there model")
    );
    assert_eq!(done.model.as_deref(), Some("scripted-test"));
    let usage = done.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (5, 5));
    assert_eq!(usage.total_tokens, 10);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].model, "scripted-test");
    assert_eq!(
        seen[0].messages,
        [
            ("system".to_string(), "be brief".to_string()),
            ("user".to_string(), "hello there model".to_string())
        ]
    );
}

#[tokio::test]
async fn a_whole_answer_and_a_tool_call() {
    let server = echo(Arc::default());
    let client = LlmClient::new(server.config()).unwrap();
    let whole = client
        .complete(
            &ChatRequest::new(vec![Message::user("hi")]),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(whole.message.content.as_deref(), Some("You said: hi"));
    assert_eq!(whole.usage.unwrap().prompt_tokens, 1);

    let mut request = ChatRequest::new(vec![Message::user("weather in Bern?")]);
    request.tools = vec![serde_json::from_value(serde_json::json!({
        "type": "function",
        "function": {"name": "weather", "description": "the weather", "parameters": {"type": "object"}}
    }))
    .unwrap()];
    let call = client
        .stream(&request, CancellationToken::new())
        .await
        .unwrap()
        .collect(|_| {})
        .await
        .unwrap();
    let tool = &call.message.tool_calls[0];
    assert_eq!(tool.function.name, "weather");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&tool.function.arguments).unwrap(),
        serde_json::json!({"city": "Bern"})
    );
}

#[tokio::test]
async fn a_body_that_is_not_json_is_refused_with_a_400() {
    let server = echo(Arc::default());
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("not JSON"));
}

#[test]
fn the_server_stops_when_dropped() {
    let server = echo(Arc::default());
    let addr = server
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    drop(server);
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "{addr} still listens"
    );
}
