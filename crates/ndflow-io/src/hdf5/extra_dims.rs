//! NDFileHDF5's extra ("virtual") dimensions and position mode (ADCore `configureDims`,
//! `NDFileHDF5Dataset::extendDataSet`, `findPositionIndex`).
//!
//! With NumExtraDims = k the frame axes are `[dim k, …, dim 3, Y, X, N]` in HDF5 order
//! (slowest first), N innermost: dim names index 0 = N, 1 = X, 2 = Y, 3..9. With k = 0 the
//! single frame axis holds NumCapture frames (0 = unlimited); with k > 0 each axis holds
//! ExtraDimSize of its name. Frames fill them N fastest. Each axis's chunk is ExtraDimChunk
//! (< 1 → 1, clamped to the size); N's chunk is NumFramesChunks.
//!
//! Position mode: a frame goes to the index held by the NDAttributes named PosNameDimN,
//! PosNameDimX, … (as ADCore; PosIndexDim* only name the index attributes, which stay 1-D
//! with DimAttDatasets). A missing attribute or an index outside the axis is an error.

use ndflow_core::{NDArray, ParamStore, ParamValue};

use super::settings::Handles;

/// The frame axes of a multi-frame file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraDims {
    /// HDF5 order, N last; 0 = unlimited.
    pub sizes: Vec<usize>,
    pub chunks: Vec<usize>,
    /// Position mode: the attribute giving the index of each axis (HDF5 order).
    pub pos_names: Option<Vec<String>>,
    /// PosIndexDim* names (index attributes, kept 1-D with DimAttDatasets).
    pub index_names: Vec<String>,
}

impl ExtraDims {
    /// The axes the parameters in `v` (one snapshot of the port's values) describe.
    pub(crate) fn read(v: &[ParamValue], h: &Handles) -> ExtraDims {
        let own = &h.own;
        let k = own.num_extra_dims.read(v).clamp(0, 9) as usize;
        let frames_chunk = own.num_frames_chunks.read(v).max(1) as usize;
        let dim_sizes = own.extra_dim_sizes();
        let dim_chunks = own.extra_dim_chunks();
        let mut sizes = Vec::with_capacity(k + 1);
        let mut chunks = Vec::with_capacity(k + 1);
        for i in (0..=k).rev() {
            let size = if k == 0 {
                h.nd.num_capture.read(v).max(0) as usize
            } else {
                dim_sizes[i].read(v).max(1) as usize
            };
            let want = if i == 0 {
                frames_chunk
            } else {
                dim_chunks[i - 1].read(v).max(1) as usize
            };
            sizes.push(size);
            chunks.push(if size > 0 { want.min(size) } else { want });
        }
        let pos_names = (own.position_mode.read(v) != 0).then(|| {
            let names = own.pos_name_dims();
            names[..=k].iter().rev().map(|n| n.read(v)).collect()
        });
        let index_names = own
            .pos_index_dims()
            .iter()
            .map(|n| n.read(v))
            .filter(|s| !s.is_empty())
            .collect();
        ExtraDims {
            sizes,
            chunks,
            pos_names,
            index_names,
        }
    }

    /// Frames the axes hold (None = unlimited).
    pub fn capacity(&self) -> Option<u64> {
        self.sizes.iter().try_fold(1u64, |acc, &s| {
            (s > 0).then(|| acc.saturating_mul(s as u64))
        })
    }

    /// Where the `n`-th frame (0-based) of a sequential write goes, N fastest.
    pub fn sequential(&self, n: u64) -> Result<Vec<usize>, String> {
        if let Some(cap) = self.capacity() {
            if n >= cap {
                return Err(format!(
                    "frame {} does not fit the extra dims {:?} ({cap} frames)",
                    n + 1,
                    self.sizes
                ));
            }
        }
        let mut rest = n;
        let mut out = vec![0usize; self.sizes.len()];
        for (slot, &size) in out.iter_mut().zip(&self.sizes).rev() {
            if size == 0 {
                *slot = rest as usize;
                rest = 0;
            } else {
                *slot = (rest % size as u64) as usize;
                rest /= size as u64;
            }
        }
        Ok(out)
    }

    /// Position mode: the index of each axis from the frame's attributes.
    pub fn position(&self, frame: &NDArray, names: &[String]) -> Result<Vec<usize>, String> {
        names
            .iter()
            .zip(&self.sizes)
            .map(|(name, &size)| {
                let attr = frame.attribute(name).ok_or_else(|| {
                    format!(
                        "position mode: frame {} has no attribute '{name}' (PosNameDim*)",
                        frame.unique_id
                    )
                })?;
                let v = attr.value.as_f64().ok_or_else(|| {
                    format!(
                        "position mode: attribute '{name}' of frame {} is no number",
                        frame.unique_id
                    )
                })?;
                if v < 0.0 || v.fract() != 0.0 || (size > 0 && v >= size as f64) {
                    return Err(format!(
                        "position mode: frame {} index {name} = {v} is outside 0..{}",
                        frame.unique_id,
                        if size > 0 {
                            size.to_string()
                        } else {
                            "∞".into()
                        }
                    ));
                }
                Ok(v as usize)
            })
            .collect()
    }

    /// The offset of `frame`, the `n`-th written to its dataset.
    pub fn offset(&self, frame: &NDArray, n: u64) -> Result<Vec<usize>, String> {
        match &self.pos_names {
            Some(names) => self.position(frame, names),
            None => self.sequential(n),
        }
    }
}

/// ADCore `calcNumFrames`: with extra dims, NumCapture = the product of their sizes.
pub(crate) fn publish_num_capture(p: &ParamStore, h: &Handles) {
    let sizes = h.own.extra_dim_sizes();
    let total = p.with_values(|v| {
        let k = h.own.num_extra_dims.read(v).clamp(0, 9) as usize;
        (k > 0).then(|| {
            sizes[..=k]
                .iter()
                .map(|s| s.read(v).max(1))
                .product::<i64>()
        })
    });
    if let Some(total) = total {
        h.nd.num_capture.set(p, total.min(i64::from(i32::MAX)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_is_fastest() {
        let d = ExtraDims {
            sizes: vec![3, 2],
            chunks: vec![1, 1],
            pos_names: None,
            index_names: vec![],
        };
        let seq: Vec<Vec<usize>> = (0..6).map(|n| d.sequential(n).unwrap()).collect();
        assert_eq!(seq[1], [0, 1]);
        assert_eq!(seq[2], [1, 0]);
        assert_eq!(seq[5], [2, 1]);
        assert!(d.sequential(6).is_err());
        let unlimited = ExtraDims {
            sizes: vec![0],
            ..d
        };
        assert_eq!(unlimited.sequential(1234).unwrap(), [1234]);
    }
}
