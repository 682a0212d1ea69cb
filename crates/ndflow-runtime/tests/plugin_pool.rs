//! Pool records of plugin ports: a plugin allocates its outputs from its source's pool, and
//! its PoolMaxMem / PoolUsedMem / PoolAllocBuffers / PoolFreeBuffers / PoolUsedBuffers show
//! that pool (the driver's); EmptyFreeList and PreAllocBuffers written on it act on that pool.

use std::sync::Arc;

use crate::common::*;
use ndflow_core::{DataType, NDArray, ParamDef, ParamValue};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};

/// Emits an 8x4 UInt16 copy of the top-left corner: one 64-byte buffer from the pool per frame.
struct Corner;

impl Plugin for Corner {
    fn plugin_type(&self) -> &'static str {
        "Corner"
    }
    fn params(&self) -> &'static [ParamDef] {
        &[]
    }
    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let mut buf = ctx.alloc(64)?;
        let src = input.buffer.as_slice::<u16>();
        for (y, row) in buf.as_mut_slice::<u16>().chunks_exact_mut(8).enumerate() {
            row.copy_from_slice(&src[y * 16..y * 16 + 8]);
        }
        let out = NDArray::new(&[8, 4], DataType::UInt16, buf.freeze())
            .map_err(|e| PluginError::Other(e.to_string()))?;
        ctx.emit(out);
        Ok(())
    }
}

const POOL: [&str; 5] = [
    "PoolMaxMem",
    "PoolUsedMem",
    "PoolAllocBuffers",
    "PoolFreeBuffers",
    "PoolUsedBuffers",
];

fn pool_of(g: &ndflow_runtime::Graph, port: &str) -> Vec<ParamValue> {
    POOL.iter().map(|k| g.get(port, k).unwrap()).collect()
}

fn int(g: &ndflow_runtime::Graph, port: &str, k: &str) -> i64 {
    g.get(port, k).unwrap().as_i64().unwrap()
}

#[test]
fn plugin_pool_records_show_the_source_pool() {
    let g = sim_graph(1);
    g.add_plugin("C", Arc::new(Corner)).unwrap();
    g.put("C", "NDArrayPort", "DRV").unwrap();
    g.put("C", "QueueSize", 100).unwrap();
    g.put("DRV", "PoolMaxMem", 1.5).unwrap();
    g.publish_now();
    // Before its first array the plugin knows no pool.
    assert_eq!(int(&g, "C", "PoolAllocBuffers"), 0);
    configure_fast(&g, 20);
    g.put("DRV", "Acquire", 1).unwrap();
    wait_done(&g);
    g.publish_now();
    assert_eq!(pool_of(&g, "C"), pool_of(&g, "DRV"));
    assert_eq!(g.get("C", "PoolMaxMem").unwrap().as_f64(), Some(1.5));
    // Driver frames are 16x8 u16 (256 bytes), the plugin's outputs 64 bytes: both in this pool.
    let (n, used) = (
        int(&g, "C", "PoolAllocBuffers"),
        (g.get("C", "PoolUsedMem").unwrap().as_f64().unwrap() * 1e6).round() as i64,
    );
    assert!(
        (1..n).any(|k| 256 * k + 64 * (n - k) == used),
        "{n} buffers, {used} bytes"
    );
    let in_use = int(&g, "C", "PoolUsedBuffers");
    assert_eq!(in_use, n - int(&g, "C", "PoolFreeBuffers"));

    g.put("C", "EmptyFreeList", 1).unwrap();
    g.publish_now();
    assert_eq!(int(&g, "DRV", "PoolFreeBuffers"), 0);
    assert_eq!(int(&g, "C", "PoolAllocBuffers"), in_use);

    let mem = |g: &ndflow_runtime::Graph| {
        (g.get("C", "PoolUsedMem").unwrap().as_f64().unwrap() * 1e6).round() as i64
    };
    let before = mem(&g);
    // Pre-allocation on the plugin: buffers of its last array's size (64 bytes).
    g.put("C", "NumPreAllocBuffers", 4).unwrap();
    g.put("C", "PreAllocBuffers", 1).unwrap();
    g.publish_now();
    assert_eq!(int(&g, "DRV", "PoolFreeBuffers"), 4);
    assert_eq!(int(&g, "C", "PoolAllocBuffers"), in_use + 4);
    assert_eq!(mem(&g) - before, 4 * 64);
    assert_eq!(pool_of(&g, "C"), pool_of(&g, "DRV"));
    g.shutdown();
}
