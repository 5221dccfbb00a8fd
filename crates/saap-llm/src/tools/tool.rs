//! One tool: its contract ([`ToolSpec`]: name, description, JSON Schema) and how to call it.
//!
//! [`typed_tool`] turns a typed async Rust function into a tool: the schema is generated from
//! the argument type with `schemars`, and the model's arguments are decoded into that type —
//! decoding is the schema check, and its error says what was wrong. This module must not know
//! about models or the loop; it runs one call.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::message::ToolDefinition;

/// What a tool promises: its name, what it does and the JSON Schema of its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by (`[a-zA-Z0-9_-]`, at most 64 characters for OpenAI).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments object.
    pub schema: Value,
}

impl ToolSpec {
    /// The definition sent to the model.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(&self.name, &self.description, self.schema.clone())
    }
}

/// How one call ended, before it is answered to the model.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    /// The tool ran and answered this text.
    Ok(String),
    /// The arguments do not match the contract: what was wrong.
    InvalidArguments(String),
    /// The tool ran and failed: its message.
    Failed(String),
}

/// A boxed call in progress.
pub type CallFuture<'a> = Pin<Box<dyn Future<Output = CallResult> + Send + 'a>>;

/// A tool the loop can call: its contract and a call taking the model's arguments text.
pub trait Tool: Send + Sync {
    /// The contract.
    fn spec(&self) -> &ToolSpec;
    /// Runs one call with the model's arguments (JSON text, maybe invalid).
    fn call<'a>(&'a self, arguments: &'a str) -> CallFuture<'a>;
}

/// The types a typed tool is fixed to, as a fn pointer (always Send + Sync, owns nothing).
type TypedSignature<A, O, E, Fut> = fn(A) -> (Fut, O, E);

struct TypedTool<A, O, E, F, Fut> {
    spec: ToolSpec,
    function: F,
    types: PhantomData<TypedSignature<A, O, E, Fut>>,
}

impl<A, O, E, F, Fut> Tool for TypedTool<A, O, E, F, Fut>
where
    A: DeserializeOwned + Send + 'static,
    O: Serialize,
    E: Display,
    F: Fn(A) -> Fut + Send + Sync,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, arguments: &'a str) -> CallFuture<'a> {
        // Models send "" for a call without arguments.
        let text = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        let parsed: Result<A, _> = serde_json::from_str(text);
        match parsed {
            Err(e) => {
                let what = e.to_string();
                Box::pin(async move { CallResult::InvalidArguments(what) })
            }
            Ok(args) => {
                let running = (self.function)(args);
                Box::pin(async move {
                    match running.await {
                        Ok(output) => CallResult::Ok(output_text(&output)),
                        Err(e) => CallResult::Failed(e.to_string()),
                    }
                })
            }
        }
    }
}

/// A tool's output as text: a string as is, anything else as JSON.
fn output_text<O: Serialize>(output: &O) -> String {
    match serde_json::to_value(output) {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(e) => format!("(the tool's output could not be written as JSON: {e})"),
    }
}

/// A tool from a typed async function: `A` is the arguments object (its JSON Schema is
/// generated), `O` the output (text as is, anything else as JSON), `E` the error (its message
/// is answered to the model).
pub fn typed_tool<A, O, E, F, Fut>(
    name: impl Into<String>,
    description: impl Into<String>,
    function: F,
) -> Arc<dyn Tool>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + 'static,
    E: Display + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    Arc::new(TypedTool {
        spec: ToolSpec {
            name: name.into(),
            description: description.into(),
            schema: schema_of::<A>(),
        },
        function,
        types: PhantomData,
    })
}

/// The JSON Schema of `A`, as a function's `parameters`: no `$schema` key.
pub fn schema_of<A: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(A).to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
    }
    schema
}
