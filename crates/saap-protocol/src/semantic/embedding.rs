//! `EmbeddingEvent`: texts turned into vectors (span kind `EMBEDDING`).
//!
//! Fields as Python's `EmbeddingEvent` writes them: the text, the model and a list of
//! `{text, vector}`. This module must not do I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::index_key;
use super::attributes::{AttributeValue, Attributes, keys};
use super::event::SemanticEvent;

/// One embedded text.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Embedding {
    /// The text.
    #[serde(default)]
    pub text: Option<String>,
    /// Its vector.
    #[serde(default)]
    pub vector: Option<Vec<f64>>,
}

/// An embedding call.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct EmbeddingEvent {
    /// The text embedded (for a single-text call).
    #[serde(default)]
    pub text: Option<String>,
    /// The embedding model.
    #[serde(default)]
    pub embedding_model_name: Option<String>,
    /// The embeddings.
    #[serde(default)]
    pub embeddings: Option<Vec<Embedding>>,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for EmbeddingEvent {
    const EVENT_NAME: &'static str = "EmbeddingEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "EMBEDDING");
        a.set_opt(
            keys::EMBEDDING_MODEL_NAME,
            self.embedding_model_name.clone(),
        );
        for (i, embedding) in self.embeddings.iter().flatten().enumerate() {
            a.set_opt(
                index_key(keys::EMBEDDING_EMBEDDINGS, i, keys::EMBEDDING_TEXT),
                embedding.text.clone(),
            );
            a.set_opt(
                index_key(keys::EMBEDDING_EMBEDDINGS, i, keys::EMBEDDING_VECTOR),
                embedding.vector.clone().map(AttributeValue::DoubleArray),
            );
        }
        a.set_opt(keys::INPUT_VALUE, self.text.clone());
        a
    }

    fn gen_ai_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::GEN_AI_OPERATION_NAME, "embeddings");
        a.set_opt(
            keys::GEN_AI_REQUEST_MODEL,
            self.embedding_model_name.clone(),
        );
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_keys() {
        let event = EmbeddingEvent {
            text: Some("hello".into()),
            embedding_model_name: Some("bge-m3".into()),
            embeddings: Some(vec![Embedding {
                text: Some("hello".into()),
                vector: Some(vec![0.5, -0.25]),
            }]),
            ..EmbeddingEvent::default()
        };
        let a = event.to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            [
                "embedding.embeddings.0.embedding.text",
                "embedding.embeddings.0.embedding.vector",
                "embedding.model_name",
                "gen_ai.operation.name",
                "gen_ai.request.model",
                "input.value",
                "openinference.span.kind",
            ]
        );
        assert_eq!(
            a.get("embedding.embeddings.0.embedding.vector"),
            Some(&AttributeValue::DoubleArray(vec![0.5, -0.25]))
        );
    }
}
