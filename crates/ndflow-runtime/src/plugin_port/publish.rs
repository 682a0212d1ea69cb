//! Counters and readbacks to parameters at a bounded rate, and the pool records.

use std::sync::atomic::Ordering;
use std::time::Instant;

use ndflow_core::{ParamValue, Pool};

use super::*;

impl PluginPort {
    /// The pool this port's outputs are allocated from: that of its last input's buffer
    /// (areaDetector's plugins allocate from their source's pool); none before a first input.
    pub(super) fn source_pool(&self) -> Option<Pool> {
        let last = self.state.lock().last_input.clone();
        last.map(|f| pool_of(&f, &self.fallback_pool))
    }

    pub(super) fn pool_put(&self, idx: usize, value: &ParamValue) {
        let (a, p) = (&self.base.array, &*self.params);
        let v = value.as_f64().unwrap_or(0.0);
        let pool = self.source_pool();
        if a.pool_max_mem.is(idx) {
            if let Some(pool) = pool {
                pool.set_max_mem((v.max(0.0) * 1e6) as usize);
            }
        } else if a.empty_free_list.is(idx) && v != 0.0 {
            if let Some(pool) = pool {
                pool.empty_free_list();
            }
            a.empty_free_list.set(p, 0);
        } else if a.pre_alloc_buffers.is(idx) && v != 0.0 {
            let n = a.num_pre_alloc_buffers.get(p).max(0) as usize;
            let bytes = a.array_size.get(p).max(0) as usize;
            if let Some(Err(e)) = pool.map(|pool| pool.preallocate(n, bytes)) {
                self.log_once("prealloc", &format!("{}: PreAllocBuffers: {e}", self.name));
            }
            a.pre_alloc_buffers.set(p, 0);
        }
    }

    /// Writes the counters to the parameters (called at a bounded rate, and at the end).
    pub(crate) fn publish(&self, rate_tick: bool) {
        let a = self.accounting();
        let (cfg, last) = {
            let st = self.state.lock();
            (st.cfg, st.last_input.clone())
        };
        let counter = self.array_counter();
        let mut w: Vec<(usize, ParamValue)> = Vec::with_capacity(32);
        let (x, b) = (&self.base.array, &self.base.plugin);
        w.push(x.array_counter.value(counter));
        w.push(b.arrays_offered.value(a.offered as i64));
        w.push(b.arrays_processed.value(a.processed as i64));
        let dropped = [
            b.dropped_queue_full,
            b.dropped_min_time,
            b.dropped_unsupported,
            b.dropped_disabled,
            b.dropped_errors,
        ];
        for (h, r) in dropped.iter().zip(DropReason::ALL.iter()) {
            w.push(h.value(a.dropped(*r) as i64));
        }
        let ad_dropped = a.dropped(DropReason::QueueFull) + a.dropped(DropReason::Unsupported);
        let base = self.dropped_arrays_base.load(Ordering::Acquire);
        w.push(
            b.dropped_arrays
                .value(ad_dropped.saturating_sub(base) as i64),
        );
        w.push(b.queue_use.value(a.queued as i64));
        w.push(
            b.queue_free
                .value(cfg.queue_size.saturating_sub(a.queued as usize) as i64),
        );
        w.push(b.in_flight.value(a.in_flight as i64));
        w.push(
            b.execution_time
                .value(self.exec_ns.load(Ordering::Relaxed) as f64 / 1e6),
        );
        w.push(b.disordered_arrays.value(self.disordered() as i64));
        w.push(b.dropped_output_arrays.value(a.dropped_output as i64));
        let sort_size = self.sorter.lock().sort_size;
        w.push(
            b.sort_free
                .value(sort_size.saturating_sub(a.sort_pending as usize) as i64),
        );
        if rate_tick {
            let mut r = self.rate.lock();
            let dt = r.0.elapsed().as_secs_f64();
            if dt > 0.0 {
                w.push(x.array_rate.value(((counter - r.1).max(0)) as f64 / dt));
            }
            *r = (Instant::now(), counter);
        }
        if let Some(f) = last {
            let s = pool_of(&f, &self.fallback_pool).stats();
            w.push(x.pool_max_mem.value(s.max_mem as f64 / 1e6));
            w.push(x.pool_used_mem.value(s.used_mem as f64 / 1e6));
            w.push(x.pool_alloc_buffers.value(s.alloc_buffers as i64));
            w.push(x.pool_free_buffers.value(s.free_buffers as i64));
            w.push(
                x.pool_used_buffers
                    .value(s.alloc_buffers as i64 - s.free_buffers as i64),
            );
        }
        self.meta.lock().write_to(x, true, &mut w);
        self.params.set_many(&w);
    }
}
