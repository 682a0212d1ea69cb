//! ROI pixel kernels: N-D extract with binning, reversal, scaling and type conversion.
//!
//! The output is walked row by row (a row = output dim 0). Each output row is fed by one
//! input row per binning block of the outer dims; dim 0 is handled inside the row loop so
//! that the common cases compile to a `memcpy` (same type) or a tight conversion loop.

use std::cell::RefCell;

use ndflow_core::{Dim, Pixel, MAX_DIMS};
use num_traits::AsPrimitive;

use ndflow_runtime::PluginError;

/// One output dim: input pixels `start .. start + out * bin`, summed in blocks of `bin`,
/// output order reversed when `reverse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DimPlan {
    pub start: usize,
    pub out: usize,
    pub bin: usize,
    pub reverse: bool,
}

impl DimPlan {
    pub fn whole(size: usize) -> DimPlan {
        DimPlan {
            start: 0,
            out: size,
            bin: 1,
            reverse: false,
        }
    }
}

/// The region of one frame, already clamped to its input (see `roi::plan`).
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub ndims: usize,
    pub dims: [DimPlan; MAX_DIMS],
    /// Input strides in elements.
    pub strides: [usize; MAX_DIMS],
}

impl Region {
    pub fn new(input: &[Dim], dims: &[DimPlan]) -> Region {
        let ndims = input.len().min(dims.len()).min(MAX_DIMS);
        let mut r = Region {
            ndims,
            dims: [DimPlan::whole(1); MAX_DIMS],
            strides: [0; MAX_DIMS],
        };
        let mut stride = 1;
        for d in 0..ndims {
            r.dims[d] = dims[d];
            r.strides[d] = stride;
            stride *= input[d].size;
        }
        r
    }

    pub fn out_len(&self) -> usize {
        self.dims[..self.ndims].iter().map(|d| d.out).product()
    }

    fn row_len(&self) -> usize {
        self.dims[0].out
    }

    /// Input rows summed into each output row.
    fn blocks_per_row(&self) -> usize {
        self.dims[1..self.ndims].iter().map(|d| d.bin).product()
    }

    pub fn is_binned(&self) -> bool {
        self.dims[..self.ndims].iter().any(|d| d.bin > 1)
    }

    /// Input offset of output index `o` along outer dim `d` (first row of its block).
    fn dim_offset(&self, d: usize, o: usize) -> usize {
        let p = &self.dims[d];
        let o = if p.reverse { p.out - 1 - o } else { o };
        (p.start + o * p.bin) * self.strides[d]
    }

    /// Input starts of the output rows, in output order.
    fn row_starts(&self) -> RowStarts<'_> {
        let start = self.dims[0].start
            + (1..self.ndims)
                .map(|d| self.dim_offset(d, 0))
                .sum::<usize>();
        RowStarts {
            region: self,
            idx: [0; MAX_DIMS],
            start,
        }
    }

    /// Offset of the `block`-th input row of a binning block from the block's first row.
    fn block_offset(&self, mut block: usize) -> usize {
        let mut off = 0;
        for d in 1..self.ndims {
            let bin = self.dims[d].bin;
            off += (block % bin) * self.strides[d];
            block /= bin;
        }
        off
    }

    /// The input row (all of dim 0 that feeds one output row) starting at `start`.
    fn input_row<'a, S>(&self, src: &'a [S], start: usize) -> Result<&'a [S], PluginError> {
        let len = self.dims[0].out * self.dims[0].bin;
        src.get(start..start + len).ok_or_else(|| {
            PluginError::Other(format!(
                "ROI row {start}..{} outside the input ({} elements)",
                start + len,
                src.len()
            ))
        })
    }
}

/// Odometer over the outer output dims: no division per row.
struct RowStarts<'a> {
    region: &'a Region,
    idx: [usize; MAX_DIMS],
    start: usize,
}

impl Iterator for RowStarts<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let r = self.region;
        let current = self.start;
        for d in 1..r.ndims {
            // `start` always contains dim_offset(d, idx[d]), so this never underflows.
            let before = r.dim_offset(d, self.idx[d]);
            self.idx[d] += 1;
            if self.idx[d] < r.dims[d].out {
                self.start = self.start - before + r.dim_offset(d, self.idx[d]);
                return Some(current);
            }
            self.idx[d] = 0;
            self.start = self.start - before + r.dim_offset(d, 0);
        }
        Some(current)
    }
}

fn check_out<D>(region: &Region, dst: &[D]) -> Result<(), PluginError> {
    if dst.len() != region.out_len() || region.row_len() == 0 {
        return Err(PluginError::Other(format!(
            "ROI output holds {} elements, region needs {}",
            dst.len(),
            region.out_len()
        )));
    }
    Ok(())
}

/// Extracts `region` of `src` into `dst` (exactly `region.out_len()` elements).
///
/// `scale` divides every output value (after binning), in f64. Binned or scaled regions
/// accumulate in f64 and convert once, saturating (`as`); others convert each pixel with
/// `as`, or copy rows when the types match.
pub(crate) fn extract<S, D>(
    region: &Region,
    src: &[S],
    dst: &mut [D],
    scale: Option<f64>,
) -> Result<(), PluginError>
where
    S: Pixel + AsPrimitive<D>,
    D: Pixel,
{
    check_out(region, dst)?;
    if region.is_binned() || scale.is_some() {
        return bin_rows(region, src, dst, scale.unwrap_or(1.0));
    }
    if S::DATA_TYPE == D::DATA_TYPE {
        if let Ok(same) = bytemuck::try_cast_slice_mut::<D, S>(dst) {
            return copy_rows(region, src, same);
        }
    }
    convert_rows(region, src, dst)
}

/// Same type, no binning: one `copy_from_slice` per output row.
fn copy_rows<T: Pixel>(region: &Region, src: &[T], dst: &mut [T]) -> Result<(), PluginError> {
    let reverse_x = region.dims[0].reverse;
    for (out, start) in dst
        .chunks_exact_mut(region.row_len())
        .zip(region.row_starts())
    {
        let input = region.input_row(src, start)?;
        if reverse_x {
            for (d, s) in out.iter_mut().zip(input.iter().rev()) {
                *d = *s;
            }
        } else {
            out.copy_from_slice(input);
        }
    }
    Ok(())
}

/// Type conversion, no binning: `as` per pixel.
fn convert_rows<S, D>(region: &Region, src: &[S], dst: &mut [D]) -> Result<(), PluginError>
where
    S: Pixel + AsPrimitive<D>,
    D: Pixel,
{
    let reverse_x = region.dims[0].reverse;
    for (out, start) in dst
        .chunks_exact_mut(region.row_len())
        .zip(region.row_starts())
    {
        let input = region.input_row(src, start)?;
        if reverse_x {
            for (d, s) in out.iter_mut().zip(input.iter().rev()) {
                *d = s.as_();
            }
        } else {
            for (d, s) in out.iter_mut().zip(input) {
                *d = s.as_();
            }
        }
    }
    Ok(())
}

thread_local! {
    // One row of f64 sums, reused across frames (no allocation per frame once grown).
    static ACC: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// Binning and/or scaling: sums each block in f64, divides by `scale`, converts once.
fn bin_rows<S: Pixel, D: Pixel>(
    region: &Region,
    src: &[S],
    dst: &mut [D],
    scale: f64,
) -> Result<(), PluginError> {
    let bin_x = region.dims[0].bin;
    let reverse_x = region.dims[0].reverse;
    let blocks = region.blocks_per_row();
    ACC.with(|cell| {
        let mut acc = cell.borrow_mut();
        acc.clear();
        acc.resize(region.row_len(), 0.0);
        for (out, start) in dst
            .chunks_exact_mut(region.row_len())
            .zip(region.row_starts())
        {
            // The first block assigns, so the accumulator needs no clearing pass.
            add_row::<S, true>(&mut acc, region.input_row(src, start)?, bin_x);
            for block in 1..blocks {
                let row = region.input_row(src, start + region.block_offset(block))?;
                add_row::<S, false>(&mut acc, row, bin_x);
            }
            store_row(out, &acc, reverse_x, scale);
        }
        Ok(())
    })
}

/// `acc[i] (+)= sum(input[i*bin .. (i+1)*bin])` (`=` when `FIRST`); the common bins get a
/// fixed-size loop that the compiler vectorises.
#[inline]
fn add_row<S: Pixel, const FIRST: bool>(acc: &mut [f64], input: &[S], bin: usize) {
    #[inline(always)]
    fn put<const FIRST: bool>(a: &mut f64, v: f64) {
        if FIRST {
            *a = v;
        } else {
            *a += v;
        }
    }
    match bin {
        1 => {
            for (a, s) in acc.iter_mut().zip(input) {
                put::<FIRST>(a, s.to_f64());
            }
        }
        2 => {
            for (a, c) in acc.iter_mut().zip(input.chunks_exact(2)) {
                put::<FIRST>(a, c[0].to_f64() + c[1].to_f64());
            }
        }
        _ => {
            for (a, c) in acc.iter_mut().zip(input.chunks_exact(bin)) {
                put::<FIRST>(a, c.iter().map(|s| s.to_f64()).sum::<f64>());
            }
        }
    }
}

#[inline]
fn store_row<D: Pixel>(out: &mut [D], acc: &[f64], reverse: bool, scale: f64) {
    // Division (not a reciprocal multiply) keeps e.g. 9/9 exactly 1, as areaDetector.
    match (reverse, scale == 1.0) {
        (false, true) => out
            .iter_mut()
            .zip(acc)
            .for_each(|(d, a)| *d = D::from_f64(*a)),
        (false, false) => out
            .iter_mut()
            .zip(acc)
            .for_each(|(d, a)| *d = D::from_f64(*a / scale)),
        (true, true) => out
            .iter_mut()
            .zip(acc.iter().rev())
            .for_each(|(d, a)| *d = D::from_f64(*a)),
        (true, false) => out
            .iter_mut()
            .zip(acc.iter().rev())
            .for_each(|(d, a)| *d = D::from_f64(*a / scale)),
    }
}
