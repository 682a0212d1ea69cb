//! Minimal bindings to Debian's libnetcdf (`libnetcdf-dev`): the dozen `nc_*` calls the
//! NDFileNetCDF writer needs, behind a safe [`NcFile`].
//!
//! Why not the `netcdf` crate: NDFileNetCDF needs only define-mode calls and `nc_put_vara`
//! on classic-model files (CDF-2 / CDF-5), and these bindings keep that to one small, checked
//! surface without the crate's ndarray-based API and extra dependencies. (`netcdf-sys` 0.9
//! links HDF5 through hdf5-metno-sys, the same binding as ours, so the crate is an option.)
//!
//! libnetcdf is not thread-safe: every call holds [`NC_LOCK`] (one file per port, and ports
//! write on their own worker threads). Its one-time initialisation does call into the shared
//! libhdf5 (it switches HDF5's automatic error printing off), so it runs first, once, under
//! hdf5-metno's library lock ([`initialize`]).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io;
use std::path::Path;
use std::sync::OnceLock;

use parking_lot::Mutex;

/// `nc_type`.
pub type NcType = c_int;

pub const NC_BYTE: NcType = 1;
pub const NC_CHAR: NcType = 2;
pub const NC_SHORT: NcType = 3;
pub const NC_INT: NcType = 4;
pub const NC_FLOAT: NcType = 5;
pub const NC_DOUBLE: NcType = 6;
pub const NC_INT64: NcType = 10;
pub const NC_UINT64: NcType = 11;

const NC_NOERR: c_int = 0;
const NC_CLOBBER: c_int = 0x0000;
/// CDF-5: classic model with 64-bit integer types.
const NC_64BIT_DATA: c_int = 0x0020;
/// CDF-2: classic model with 64-bit file offsets (files over 2 GiB).
const NC_64BIT_OFFSET: c_int = 0x0200;
const NC_NOFILL: c_int = 0x100;
/// `nc_def_dim` length of the unlimited (record) dimension.
pub const NC_UNLIMITED: usize = 0;
/// The variable id of global attributes.
pub const NC_GLOBAL: c_int = -1;

// libnetcdf is loaded when the first netCDF file is created, not linked: the binary and the
// Python wheel then start (and the wheel stays small: linking it pulls in curl, TLS, Kerberos,
// LDAP and ICU) on machines without it, and only the `netcdf` port asks for it.

/// The shared objects tried, newest soname first.
const LIBRARY_NAMES: &[&str] = &[
    "libnetcdf.so.22",
    "libnetcdf.so.19",
    "libnetcdf.so.15",
    "libnetcdf.so",
];

/// A status no libnetcdf call returns: the library is not loaded.
const NOT_LOADED: c_int = -100_000;

type CreateFn = unsafe extern "C" fn(*const c_char, c_int, *mut c_int) -> c_int;
type SetFillFn = unsafe extern "C" fn(c_int, c_int, *mut c_int) -> c_int;
type DefDimFn = unsafe extern "C" fn(c_int, *const c_char, usize, *mut c_int) -> c_int;
type DefVarFn =
    unsafe extern "C" fn(c_int, *const c_char, NcType, c_int, *const c_int, *mut c_int) -> c_int;
type PutAttTextFn =
    unsafe extern "C" fn(c_int, c_int, *const c_char, usize, *const c_char) -> c_int;
type PutAttFn =
    unsafe extern "C" fn(c_int, c_int, *const c_char, NcType, usize, *const c_void) -> c_int;
type IdFn = unsafe extern "C" fn(c_int) -> c_int;
type PutVaraFn =
    unsafe extern "C" fn(c_int, c_int, *const usize, *const usize, *const c_void) -> c_int;
type StrErrorFn = unsafe extern "C" fn(c_int) -> *const c_char;
type InitFn = unsafe extern "C" fn() -> c_int;

/// The functions of the loaded library (the `Library` keeps them mapped).
struct Lib {
    _lib: libloading::Library,
    create: CreateFn,
    set_fill: SetFillFn,
    def_dim: DefDimFn,
    def_var: DefVarFn,
    put_att_text: PutAttTextFn,
    put_att: PutAttFn,
    enddef: IdFn,
    put_vara: PutVaraFn,
    sync: IdFn,
    close: IdFn,
    strerror: StrErrorFn,
    initialize: InitFn,
}

static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();

fn load() -> Result<Lib, String> {
    let mut tried = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading runs libnetcdf's ELF initialisers, which set up only its own state
        // (its dispatch tables); nothing else of the process is touched.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return bind(lib).map_err(|e| format!("{name}: {e}")),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(format!(
        "cannot load libnetcdf ({}); install it (Debian/Ubuntu: apt-get install libnetcdf-dev)",
        tried.join("; ")
    ))
}

fn bind(lib: libloading::Library) -> Result<Lib, libloading::Error> {
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol is libnetcdf's public function of that name, whose C
            // prototype (netcdf.h) is the function pointer type it is read as.
            let f = unsafe { lib.get(concat!($name, "\0").as_bytes()) }?;
            *f
        }};
    }
    Ok(Lib {
        create: sym!("nc_create"),
        set_fill: sym!("nc_set_fill"),
        def_dim: sym!("nc_def_dim"),
        def_var: sym!("nc_def_var"),
        put_att_text: sym!("nc_put_att_text"),
        put_att: sym!("nc_put_att"),
        enddef: sym!("nc_enddef"),
        put_vara: sym!("nc_put_vara"),
        sync: sym!("nc_sync"),
        close: sym!("nc_close"),
        strerror: sym!("nc_strerror"),
        initialize: sym!("nc_initialize"),
        _lib: lib,
    })
}

/// The library, loaded on first use.
fn lib() -> io::Result<&'static Lib> {
    LIB.get_or_init(load)
        .as_ref()
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.clone()))
}

/// The library once loaded; calls made before (impossible: an [`NcFile`] exists only after a
/// load) return [`NOT_LOADED`].
fn loaded() -> Option<&'static Lib> {
    LIB.get().and_then(|r| r.as_ref().ok())
}

// Thin wrappers with libnetcdf's names and contracts (each `unsafe fn` has the contract of the
// C function it calls).

unsafe fn nc_create(path: *const c_char, cmode: c_int, ncidp: *mut c_int) -> c_int {
    // SAFETY: the caller upholds nc_create's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe { (l.create)(path, cmode, ncidp) })
}
unsafe fn nc_set_fill(ncid: c_int, fillmode: c_int, old_modep: *mut c_int) -> c_int {
    // SAFETY: the caller upholds nc_set_fill's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe {
        (l.set_fill)(ncid, fillmode, old_modep)
    })
}
unsafe fn nc_def_dim(ncid: c_int, name: *const c_char, len: usize, idp: *mut c_int) -> c_int {
    // SAFETY: the caller upholds nc_def_dim's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe { (l.def_dim)(ncid, name, len, idp) })
}
unsafe fn nc_def_var(
    ncid: c_int,
    name: *const c_char,
    xtype: NcType,
    ndims: c_int,
    dimidsp: *const c_int,
    varidp: *mut c_int,
) -> c_int {
    // SAFETY: the caller upholds nc_def_var's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe {
        (l.def_var)(ncid, name, xtype, ndims, dimidsp, varidp)
    })
}
unsafe fn nc_put_att_text(
    ncid: c_int,
    varid: c_int,
    name: *const c_char,
    len: usize,
    op: *const c_char,
) -> c_int {
    // SAFETY: the caller upholds nc_put_att_text's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe {
        (l.put_att_text)(ncid, varid, name, len, op)
    })
}
unsafe fn nc_put_att(
    ncid: c_int,
    varid: c_int,
    name: *const c_char,
    xtype: NcType,
    len: usize,
    op: *const c_void,
) -> c_int {
    // SAFETY: the caller upholds nc_put_att's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe {
        (l.put_att)(ncid, varid, name, xtype, len, op)
    })
}
unsafe fn nc_enddef(ncid: c_int) -> c_int {
    // SAFETY: the caller upholds nc_enddef's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe { (l.enddef)(ncid) })
}
unsafe fn nc_put_vara(
    ncid: c_int,
    varid: c_int,
    startp: *const usize,
    countp: *const usize,
    op: *const c_void,
) -> c_int {
    // SAFETY: the caller upholds nc_put_vara's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe {
        (l.put_vara)(ncid, varid, startp, countp, op)
    })
}
unsafe fn nc_sync(ncid: c_int) -> c_int {
    // SAFETY: the caller upholds nc_sync's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe { (l.sync)(ncid) })
}
unsafe fn nc_close(ncid: c_int) -> c_int {
    // SAFETY: the caller upholds nc_close's contract.
    loaded().map_or(NOT_LOADED, |l| unsafe { (l.close)(ncid) })
}

/// Serialises every libnetcdf call in the process.
static NC_LOCK: Mutex<()> = Mutex::new(());

/// libnetcdf's one-time initialisation, under hdf5-metno's lock since it calls libhdf5
/// (another thread may be writing HDF5 files). Returns its status (the first call's).
fn initialize() -> io::Result<c_int> {
    let l = lib()?;
    static STATUS: OnceLock<c_int> = OnceLock::new();
    Ok(*STATUS.get_or_init(|| {
        hdf5_metno::sync::sync(|| {
            let _g = NC_LOCK.lock();
            // SAFETY: no arguments; called once, before any other nc_* call of this process,
            // with both libnetcdf's and libhdf5's callers locked out.
            unsafe { (l.initialize)() }
        })
    }))
}

/// Bytes per element of a classic-model type.
pub fn type_size(t: NcType) -> Option<usize> {
    Some(match t {
        NC_BYTE | NC_CHAR => 1,
        NC_SHORT => 2,
        NC_INT | NC_FLOAT => 4,
        NC_DOUBLE | NC_INT64 | NC_UINT64 => 8,
        _ => return None,
    })
}

fn error(what: &str, status: c_int) -> io::Error {
    let Some(l) = loaded().filter(|_| status != NOT_LOADED) else {
        return io::Error::other(format!("netCDF {what}: libnetcdf is not loaded"));
    };
    // SAFETY: nc_strerror returns a pointer to a static NUL-terminated string for any code
    // (unknown codes give a generic message), never null.
    let msg = unsafe { CStr::from_ptr((l.strerror)(status)) };
    io::Error::other(format!("netCDF {what}: {}", msg.to_string_lossy()))
}

fn check(what: &str, status: c_int) -> io::Result<()> {
    if status == NC_NOERR {
        Ok(())
    } else {
        Err(error(what, status))
    }
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("netCDF name {name:?} contains a NUL byte"),
        )
    })
}

/// A number type whose memory layout is the one libnetcdf reads for its `nc_type`.
trait AttNumber {
    const NC_TYPE: NcType;
}
impl AttNumber for i32 {
    const NC_TYPE: NcType = NC_INT;
}
impl AttNumber for f64 {
    const NC_TYPE: NcType = NC_DOUBLE;
}

/// One netCDF file being written (define mode until [`NcFile::enddef`]). Closed on drop.
pub struct NcFile {
    id: c_int,
    open: bool,
    /// Every defined dimension's length (NC_UNLIMITED for the record dimension).
    dims: Vec<usize>,
    /// Every defined variable: (type, dimension ids).
    vars: Vec<(NcType, Vec<c_int>)>,
}

impl NcFile {
    /// Creates (replacing) `path`: CDF-5 when `cdf5` (64-bit integer types), else CDF-2.
    /// Fill is off: the writer writes every variable of every record.
    pub fn create(path: &Path, cdf5: bool) -> io::Result<NcFile> {
        let name = c_name(&path.to_string_lossy())?;
        let mode = NC_CLOBBER | if cdf5 { NC_64BIT_DATA } else { NC_64BIT_OFFSET };
        check("initialize", initialize()?)?;
        let mut id: c_int = -1;
        let _g = NC_LOCK.lock();
        // SAFETY: `name` is a valid NUL-terminated string alive for the call; `id` is a valid
        // out-pointer.
        check("create", unsafe { nc_create(name.as_ptr(), mode, &mut id) })?;
        let file = NcFile {
            id,
            open: true,
            dims: Vec::new(),
            vars: Vec::new(),
        };
        let mut old: c_int = 0;
        // SAFETY: `id` was returned by nc_create; `old` is a valid out-pointer.
        check("set_fill", unsafe { nc_set_fill(id, NC_NOFILL, &mut old) })?;
        Ok(file)
    }

    /// Defines a dimension (`NC_UNLIMITED` for the record dimension); returns its id.
    pub fn def_dim(&mut self, name: &str, len: usize) -> io::Result<c_int> {
        let n = c_name(name)?;
        let mut dim: c_int = -1;
        let _g = NC_LOCK.lock();
        // SAFETY: open file id, valid NUL-terminated name, valid out-pointer.
        check(&format!("define dimension {name}"), unsafe {
            nc_def_dim(self.id, n.as_ptr(), len, &mut dim)
        })?;
        self.dims.push(len);
        Ok(dim)
    }

    /// Defines a variable over `dims` (ids from [`NcFile::def_dim`]); returns its id.
    pub fn def_var(&mut self, name: &str, t: NcType, dims: &[c_int]) -> io::Result<c_int> {
        let n = c_name(name)?;
        if type_size(t).is_none() {
            return Err(io::Error::other(format!(
                "netCDF variable {name}: type {t}"
            )));
        }
        if dims
            .iter()
            .any(|&d| usize::try_from(d).map_or(true, |d| d >= self.dims.len()))
        {
            return Err(io::Error::other(format!(
                "netCDF variable {name}: unknown dimension"
            )));
        }
        let ndims = c_int::try_from(dims.len()).map_err(io::Error::other)?;
        let mut var: c_int = -1;
        let _g = NC_LOCK.lock();
        // SAFETY: open file id, valid name, `dims` points to `ndims` valid dimension ids
        // (checked above), valid out-pointer.
        check(&format!("define variable {name}"), unsafe {
            nc_def_var(self.id, n.as_ptr(), t, ndims, dims.as_ptr(), &mut var)
        })?;
        self.vars.push((t, dims.to_vec()));
        Ok(var)
    }

    /// A text attribute of variable `var` (or [`NC_GLOBAL`]).
    pub fn put_att_text(&mut self, var: c_int, name: &str, value: &str) -> io::Result<()> {
        let n = c_name(name)?;
        let _g = NC_LOCK.lock();
        // SAFETY: open file id, valid name; `value` is `value.len()` readable bytes (netCDF
        // text attributes are counted, not NUL-terminated).
        check(&format!("attribute {name}"), unsafe {
            nc_put_att_text(self.id, var, n.as_ptr(), value.len(), value.as_ptr().cast())
        })
    }

    /// An NC_INT attribute of `var` (or [`NC_GLOBAL`]).
    pub fn put_att_i32(&mut self, var: c_int, name: &str, values: &[i32]) -> io::Result<()> {
        self.put_att_numbers(var, name, values)
    }

    /// An NC_DOUBLE attribute of `var` (or [`NC_GLOBAL`]).
    pub fn put_att_f64(&mut self, var: c_int, name: &str, values: &[f64]) -> io::Result<()> {
        self.put_att_numbers(var, name, values)
    }

    fn put_att_numbers<T: AttNumber>(
        &mut self,
        var: c_int,
        name: &str,
        values: &[T],
    ) -> io::Result<()> {
        let n = c_name(name)?;
        let _g = NC_LOCK.lock();
        // SAFETY: open file id, valid name; `values` holds `values.len()` elements of `T`,
        // the memory type nc_put_att reads for `T::NC_TYPE` (see [`AttNumber`]).
        check(&format!("attribute {name}"), unsafe {
            nc_put_att(
                self.id,
                var,
                n.as_ptr(),
                T::NC_TYPE,
                values.len(),
                values.as_ptr().cast(),
            )
        })
    }

    /// Leaves define mode.
    pub fn enddef(&mut self) -> io::Result<()> {
        let _g = NC_LOCK.lock();
        // SAFETY: open file id.
        check("enddef", unsafe { nc_enddef(self.id) })
    }

    /// Writes the hyperslab `start`/`count` of `var` from `data`, native-endian elements of
    /// the variable's own type (no conversion). The lengths are checked against the variable.
    pub fn put_vara(
        &mut self,
        var: c_int,
        start: &[usize],
        count: &[usize],
        data: &[u8],
    ) -> io::Result<()> {
        let (t, dims) = usize::try_from(var)
            .ok()
            .and_then(|v| self.vars.get(v))
            .ok_or_else(|| io::Error::other(format!("netCDF: no variable {var}")))?;
        let size = type_size(*t).unwrap_or(1);
        let want = count
            .iter()
            .try_fold(size, |a, &c| a.checked_mul(c))
            .unwrap_or(usize::MAX);
        if start.len() != dims.len() || count.len() != dims.len() || data.len() != want {
            return Err(io::Error::other(format!(
                "netCDF write: {} bytes for count {count:?} of a {}-dim variable",
                data.len(),
                dims.len()
            )));
        }
        // Fixed dimensions bound the slab (netCDF checks too; this keeps the contract local).
        for ((&d, &s), &c) in dims.iter().zip(start).zip(count) {
            let len = self.dims.get(d as usize).copied().unwrap_or(0);
            if len != NC_UNLIMITED && s.saturating_add(c) > len {
                return Err(io::Error::other(format!(
                    "netCDF write: start {start:?} count {count:?} outside the variable"
                )));
            }
        }
        let _g = NC_LOCK.lock();
        // SAFETY: open file id; `start` and `count` hold one entry per dimension of `var`;
        // `data` holds exactly prod(count) elements of the variable's type (checked above),
        // which is what nc_put_vara reads.
        check("write", unsafe {
            nc_put_vara(
                self.id,
                var,
                start.as_ptr(),
                count.as_ptr(),
                data.as_ptr().cast(),
            )
        })
    }

    /// Flushes buffered data to the file.
    pub fn sync(&mut self) -> io::Result<()> {
        let _g = NC_LOCK.lock();
        // SAFETY: open file id.
        check("sync", unsafe { nc_sync(self.id) })
    }

    /// Closes the file, reporting a failed final write.
    pub fn close(mut self) -> io::Result<()> {
        self.open = false;
        let _g = NC_LOCK.lock();
        // SAFETY: open file id, closed exactly once (`open` is now false, so Drop skips it).
        check("close", unsafe { nc_close(self.id) })
    }
}

impl Drop for NcFile {
    fn drop(&mut self) {
        if self.open {
            let _g = NC_LOCK.lock();
            // SAFETY: open file id, closed exactly once.
            unsafe {
                nc_close(self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_record_variable_and_checks_lengths() {
        let dir = std::env::temp_dir().join(format!("ndflow-nc-ffi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.nc");
        let mut f = NcFile::create(&path, false).unwrap();
        let rec = f.def_dim("n", NC_UNLIMITED).unwrap();
        let x = f.def_dim("x", 3).unwrap();
        let v = f.def_var("v", NC_SHORT, &[rec, x]).unwrap();
        f.put_att_text(NC_GLOBAL, "title", "t").unwrap();
        f.put_att_i32(v, "a", &[1, 2]).unwrap();
        f.put_att_f64(NC_GLOBAL, "b", &[0.5]).unwrap();
        assert!(f.def_var("bad", NC_INT, &[7]).is_err());
        assert!(f.def_var("bad\0", NC_INT, &[x]).is_err());
        // Duplicate names are netCDF's error, reported, not a panic.
        let e = f.def_dim("x", 3).unwrap_err();
        assert!(e.to_string().contains("define dimension x"), "{e}");
        f.enddef().unwrap();
        let data: Vec<u8> = [1i16, 2, 3].iter().flat_map(|v| v.to_ne_bytes()).collect();
        f.put_vara(v, &[0, 0], &[1, 3], &data).unwrap();
        f.put_vara(v, &[1, 0], &[1, 3], &data).unwrap();
        assert!(f.put_vara(v, &[2, 0], &[1, 3], &data[..4]).is_err());
        assert!(f.put_vara(v, &[2, 1], &[1, 3], &data).is_err());
        assert!(f.put_vara(99, &[0], &[1], &data[..2]).is_err());
        f.sync().unwrap();
        f.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"CDF\x02");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn create_in_a_missing_directory_is_an_error() {
        let e = NcFile::create(Path::new("/nonexistent-ndflow/x.nc"), true)
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("netCDF create"), "{e}");
    }
}
