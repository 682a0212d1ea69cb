use thiserror::Error;

/// Why a codec call failed. Every variant names what was wrong.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CodecError {
    #[error("output buffer too small: need {need} bytes, have {have}")]
    OutputTooSmall { need: usize, have: usize },
    #[error("corrupt or truncated {codec} stream: {detail}")]
    Corrupt { codec: &'static str, detail: String },
    #[error("invalid {codec} argument: {detail}")]
    InvalidArgument { codec: &'static str, detail: String },
    #[error("{codec} library error: {detail}")]
    Library { codec: &'static str, detail: String },
}
