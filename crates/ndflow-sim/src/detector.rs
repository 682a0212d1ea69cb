//! [`SimDetector`]: the [`Driver`] glue — settings snapshot, reset detection, readout.

use ndflow_core::{with_pixel_type, Dim, NDArray, ParamDef, ParamStore, Pool};
use ndflow_runtime::port_params::{bind, driver_layout, DriverBase};
use ndflow_runtime::{Driver, DriverError};

use crate::generate::{Generator, Words};
use crate::layout::{convert_region, Layout};
use crate::params::{self, Region, SimParams, SIM_PARAMS};
use crate::pixel::{Rng, SimPixel};
use ndflow_runtime::{Built, ConstructorKey, PortType};

const SEED: u64 = 0x5EED_AD51_0D37_0001;

/// The simulated detector (areaDetector's ADSimDetector): LinearRamp, Peaks, Sine and
/// Offset&Noise images of `max_size_x × max_size_y` pixels in any of the 10 data types
/// and Mono/RGB1/RGB2/RGB3, read out through MinX/SizeX/BinX/ReverseX (and Y).
pub struct SimDetector {
    max_size: [usize; 2],
    /// simDetector's own handles and the driver base's, in the port's layout.
    p: SimParams,
    base: DriverBase,
    /// Store version of the last settings snapshot.
    seen_version: Option<u64>,
    region: Region,
    generator: Option<Generator>,
    /// Raw image when the readout is not the whole sensor.
    scratch: Words,
}

impl SimDetector {
    /// A simulator with a `max_size_x × max_size_y` sensor (0 is taken as 1).
    pub fn new(max_size_x: usize, max_size_y: usize) -> SimDetector {
        let max_size = [max_size_x.max(1), max_size_y.max(1)];
        let layout = driver_layout(SIM_PARAMS);
        SimDetector {
            max_size,
            p: bind(&layout, SimParams::bind),
            base: DriverBase::of(&layout),
            seen_version: None,
            region: Region {
                min: [0; 2],
                size: max_size,
                bin: [1; 2],
                reverse: [false; 2],
            },
            generator: None,
            scratch: Words::default(),
        }
    }

    /// Frames produced since the image was last recomputed (0 right after a reset).
    pub fn frames_since_reset(&self) -> u64 {
        self.generator.as_ref().map_or(0, |g| g.frame)
    }

    /// Re-reads the settings when the store changed; recomputes the base image when
    /// anything that shapes it changed or Reset was written.
    fn refresh(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let version = params.version();
        if self.seen_version == Some(version) && self.generator.is_some() {
            return Ok(());
        }
        let snap = params::read(params, &self.p, &self.base);
        if !snap.fixes.is_empty() {
            params.set_many(&snap.fixes);
        }
        let changed = self.generator.as_ref().is_none_or(|g| g.s != snap.image);
        let [mx, my] = [snap.image.max_x, snap.image.max_y];
        if mx
            .checked_mul(my)
            .and_then(|n| n.checked_mul(3 * 8))
            .is_none()
        {
            return Err(DriverError::Other(format!(
                "sensor size {mx}x{my} is too large"
            )));
        }
        if snap.reset || changed {
            let rng = self
                .generator
                .take()
                .map_or_else(|| Rng::new(SEED), Generator::into_rng);
            let mut g = Generator::new(snap.image, rng);
            with_pixel_type!(g.s.data_type, T => g.prepare::<T>()).map_err(DriverError::Other)?;
            self.generator = Some(g);
            if snap.reset {
                self.p.reset.set(params, 0);
            }
        }
        self.region = snap.region;
        // The version read before the snapshot: our own write-backs make the next frame
        // look again (cheaply), and no external write can slip between read and record.
        self.seen_version = Some(version);
        Ok(())
    }
}

impl Driver for SimDetector {
    fn driver_type(&self) -> &'static str {
        "simDetector"
    }

    fn params(&self) -> &'static [ParamDef] {
        SIM_PARAMS
    }

    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError> {
        let [mx, my] = self.max_size.map(|n| n as i64);
        let (nd, ad) = (&self.base.array, &self.base.driver);
        params.set_many(&[
            nd.manufacturer.value("Simulated detector".into()),
            nd.model.value("Basic simulator".into()),
            nd.serial_number.value("No serial number".into()),
            nd.firmware_version.value("No firmware".into()),
            nd.sdk_version.value(env!("CARGO_PKG_VERSION").into()),
            ad.max_size_x.value(mx),
            ad.max_size_y.value(my),
            ad.min_x.value(0),
            ad.min_y.value(0),
            ad.size_x.value(mx),
            ad.size_y.value(my),
            ad.bin_x.value(1),
            ad.bin_y.value(1),
            nd.array_size_x.value(mx),
            nd.array_size_y.value(my),
            nd.array_size.value(0),
        ]);
        self.seen_version = None;
        self.generator = None;
        self.refresh(params)
    }

    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError> {
        self.refresh(params)?;
        let region = self.region;
        let Some(g) = self.generator.as_mut() else {
            return Err(DriverError::Other("simulator image not initialised".into()));
        };
        with_pixel_type!(g.s.data_type, T => read_out::<T>(g, &region, &mut self.scratch, pool))
    }
}

/// Renders the next frame and reads `region` of it into a pool buffer.
fn read_out<T: SimPixel>(
    g: &mut Generator,
    region: &Region,
    scratch: &mut Words,
    pool: &Pool,
) -> Result<NDArray, DriverError> {
    let raw_layout = g.layout;
    let out_layout = Layout {
        nx: region.out_size(0),
        ny: region.out_size(1),
        mode: raw_layout.mode,
    };
    let mut buf = pool.alloc(out_layout.len() * std::mem::size_of::<T>())?;
    let out = buf.as_mut_slice::<T>();
    if region.is_identity([raw_layout.nx, raw_layout.ny]) {
        g.render(out);
    } else {
        let n = raw_layout.len();
        scratch.grow::<T>(n).map_err(DriverError::Other)?;
        let raw = scratch.view_mut::<T>(n);
        g.render(raw);
        convert_region(raw, raw_layout, region, out);
    }
    let (sizes, xd, yd) = out_layout.dims();
    let mut frame = NDArray::new(&sizes, T::DATA_TYPE, buf.freeze())?;
    for (axis, d) in [xd, yd].into_iter().enumerate() {
        frame.dims[d] = Dim {
            size: sizes[d],
            offset: region.min[axis],
            binning: region.bin[axis],
            reverse: region.reverse[axis],
        };
    }
    frame.set_color_mode(raw_layout.mode);
    Ok(frame)
}

/// The port type `type = "sim"`.
pub const PORT: PortType = PortType::driver(
    "sim",
    "simDetector",
    "Simulated detector: ramp, peaks, sine, offset & noise",
    |a| {
        let x = a.int("MaxSizeX", 1..=65536, 1024)? as usize;
        let y = a.int("MaxSizeY", 1..=65536, 1024)? as usize;
        Ok(Built::Driver(Box::new(SimDetector::new(x, y))))
    },
)
.keys(&[
    ConstructorKey {
        name: "MaxSizeX",
        doc: "Sensor width in pixels, 1..65536 (default 1024)",
    },
    ConstructorKey {
        name: "MaxSizeY",
        doc: "Sensor height in pixels, 1..65536 (default 1024)",
    },
]);
