use thiserror::Error;

/// Errors from the data model. Each names what was wrong so that callers can pass it on.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    #[error("pool memory cap reached: need {requested} bytes, {used} of {max} in use")]
    PoolExhausted {
        requested: usize,
        used: usize,
        max: usize,
    },
    #[error("frame has {0} dimensions; 1..=10 are allowed")]
    BadDims(usize),
    #[error("data type mismatch: frame is {actual}, caller asked for {wanted}")]
    TypeMismatch {
        actual: &'static str,
        wanted: &'static str,
    },
    #[error("frame is compressed with codec '{0}'")]
    Compressed(String),
    #[error("buffer holds {have} bytes but the dims need {need}")]
    ShortBuffer { have: usize, need: usize },
    #[error("unknown data type '{0}'")]
    UnknownDataType(String),
}
