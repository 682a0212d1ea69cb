//! The page, compiled into the binary: nothing is fetched from elsewhere at run time.

pub const INDEX: &str = include_str!("../assets/index.html");
pub const APP_JS: &str = include_str!("../assets/app.js");
pub const GL_JS: &str = include_str!("../assets/gl.js");
pub const PLOTS_JS: &str = include_str!("../assets/plots.js");
pub const STYLE: &str = include_str!("../assets/style.css");
