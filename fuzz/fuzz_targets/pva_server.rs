#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ndflow_fuzz::pva::server(data));
