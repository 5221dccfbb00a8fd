//! `RetrieverEvent` and `RerankerEvent`: documents found and re-ordered (span kinds
//! `RETRIEVER`, `RERANKER`).
//!
//! Python writes retrieved chunks as `IngestedNode`s: `id`, `content`, `score`,
//! `document_id` and many optional fields (headings, offsets, source, dates…). [`Node`] types
//! the ones the attributes need and keeps every other field as it came. This module must not
//! do I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::attributes::index_key;
use super::attributes::{Attributes, keys};
use super::event::SemanticEvent;

/// Keys of a node that Python puts in `document.metadata`.
const METADATA_KEYS: [&str; 11] = [
    "document_id",
    "source",
    "source_origin",
    "namespace",
    "number_of_pages",
    "document_title",
    "language",
    "version",
    "created_at",
    "updated_at",
    "inserted_at",
];

/// A retrieved chunk of a document.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Node {
    /// The chunk's id.
    pub id: String,
    /// Its text.
    #[serde(default)]
    pub content: String,
    /// The document it belongs to.
    #[serde(default)]
    pub document_id: Option<String>,
    /// Relevance score.
    #[serde(default)]
    pub score: Option<f64>,
    /// Every other field (type, headings, offsets, source, dates…), kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Node {
    /// A chunk with an id, text and score.
    pub fn new(id: impl Into<String>, content: impl Into<String>, score: Option<f64>) -> Node {
        Node {
            id: id.into(),
            content: content.into(),
            score,
            ..Node::default()
        }
    }

    fn attributes(&self, prefix: &str, index: usize, a: &mut Attributes) {
        a.set(
            index_key(prefix, index, keys::DOCUMENT_ID),
            self.id.as_str(),
        );
        a.set(
            index_key(prefix, index, keys::DOCUMENT_CONTENT),
            self.content.as_str(),
        );
        a.set_opt(index_key(prefix, index, keys::DOCUMENT_SCORE), self.score);
        let mut metadata = Map::new();
        if let Some(document_id) = &self.document_id {
            metadata.insert("document_id".into(), Value::String(document_id.clone()));
        }
        for key in METADATA_KEYS {
            if let Some(value) = self.extra.get(key) {
                metadata.insert(key.to_owned(), value.clone());
            }
        }
        if !metadata.is_empty() {
            a.set(
                index_key(prefix, index, keys::DOCUMENT_METADATA),
                Value::Object(metadata).to_string(),
            );
        }
    }
}

/// Chunks found for a query.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct RetrieverEvent {
    /// The chunks, best first.
    #[serde(default)]
    pub nodes: Option<Vec<Node>>,
    /// saap: the query they were found for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for RetrieverEvent {
    const EVENT_NAME: &'static str = "RetrieverEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "RETRIEVER");
        for (i, node) in self.nodes.iter().flatten().enumerate() {
            node.attributes(keys::RETRIEVAL_DOCUMENTS, i, &mut a);
        }
        a.set_opt(keys::INPUT_VALUE, self.query.clone());
        a
    }
}

/// Chunks re-ordered by a reranker.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct RerankerEvent {
    /// The chunks given to the reranker.
    #[serde(default)]
    pub input_nodes: Option<Vec<Node>>,
    /// The chunks it kept, best first.
    #[serde(default)]
    pub output_nodes: Option<Vec<Node>>,
    /// The query.
    #[serde(default)]
    pub query: Option<String>,
    /// The reranker model.
    #[serde(default)]
    pub rerank_model_name: Option<String>,
    /// How many it keeps.
    #[serde(default)]
    pub top_n: Option<i64>,
    /// Whether the chunks were reranked at all.
    #[serde(default)]
    pub reranked: Option<bool>,
    /// Fields this type does not know, kept in order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SemanticEvent for RerankerEvent {
    const EVENT_NAME: &'static str = "RerankerEvent";

    fn openinference_attributes(&self) -> Attributes {
        let mut a = Attributes::new();
        a.set(keys::OPENINFERENCE_SPAN_KIND, "RERANKER");
        a.set_opt(keys::RERANKER_QUERY, self.query.clone());
        a.set_opt(keys::RERANKER_MODEL_NAME, self.rerank_model_name.clone());
        a.set_opt(keys::RERANKER_TOP_K, self.top_n);
        for (i, node) in self.input_nodes.iter().flatten().enumerate() {
            node.attributes(keys::RERANKER_INPUT_DOCUMENTS, i, &mut a);
        }
        for (i, node) in self.output_nodes.iter().flatten().enumerate() {
            node.attributes(keys::RERANKER_OUTPUT_DOCUMENTS, i, &mut a);
        }
        a.set_opt(keys::INPUT_VALUE, self.query.clone());
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantic::AttributeValue;

    #[test]
    fn retriever_document_keys() {
        let mut node = Node::new("n1", "Bern is the capital.", Some(0.93));
        node.document_id = Some("d1".into());
        node.extra.insert("namespace".into(), Value::from("wiki"));
        node.extra.insert("h1".into(), Value::from("Cities"));
        let event = RetrieverEvent {
            nodes: Some(vec![node, Node::new("n2", "Zürich is larger.", None)]),
            query: Some("capital of Switzerland".into()),
            ..RetrieverEvent::default()
        };
        let a = event.to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            [
                "input.value",
                "openinference.span.kind",
                "retrieval.documents.0.document.content",
                "retrieval.documents.0.document.id",
                "retrieval.documents.0.document.metadata",
                "retrieval.documents.0.document.score",
                "retrieval.documents.1.document.content",
                "retrieval.documents.1.document.id",
            ]
        );
        assert_eq!(a.get_str("openinference.span.kind"), Some("RETRIEVER"));
        assert_eq!(
            a.get("retrieval.documents.0.document.score"),
            Some(&AttributeValue::Double(0.93))
        );
        assert_eq!(
            a.get_str("retrieval.documents.0.document.metadata"),
            Some(r#"{"document_id":"d1","namespace":"wiki"}"#)
        );
    }

    #[test]
    fn reranker_keys() {
        let event = RerankerEvent {
            input_nodes: Some(vec![Node::new("a", "x", Some(0.1))]),
            output_nodes: Some(vec![Node::new("a", "x", Some(0.9))]),
            query: Some("q".into()),
            rerank_model_name: Some("bge-reranker".into()),
            top_n: Some(1),
            reranked: Some(true),
            ..RerankerEvent::default()
        };
        let a = event.to_semantic_convention();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            [
                "input.value",
                "openinference.span.kind",
                "reranker.input_documents.0.document.content",
                "reranker.input_documents.0.document.id",
                "reranker.input_documents.0.document.score",
                "reranker.model_name",
                "reranker.output_documents.0.document.content",
                "reranker.output_documents.0.document.id",
                "reranker.output_documents.0.document.score",
                "reranker.query",
                "reranker.top_k",
            ]
        );
        assert_eq!(a.get_str("openinference.span.kind"), Some("RERANKER"));
    }
}
