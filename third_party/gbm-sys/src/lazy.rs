//! The macro that turns libgbm's function list into functions resolved on first use.

/// The name libgbm is opened by: its SONAME, as the link-time dependency named it.
pub(crate) const LIBRARY: &str = "libgbm.so.1";

/// Declares one `pub unsafe fn` per listed C function and a table of their addresses that is
/// filled once, the first time any of them is called. A function listed with
/// `=> fallback()` answers `fallback()` when libgbm or the symbol is missing; the others
/// panic with the symbol's name then (upstream's program would not have started at all).
macro_rules! functions {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $(=> $fallback:ident())?;)*) => {
        struct Table {
            // Kept open for the program's life: the addresses below point into it.
            _library: ::libloading::Library,
            $($name: Option<unsafe extern "C" fn($($ty),*) $(-> $ret)?>,)*
        }

        fn table() -> Option<&'static Table> {
            static TABLE: ::std::sync::OnceLock<Option<Table>> = ::std::sync::OnceLock::new();
            TABLE
                .get_or_init(|| {
                    // SAFETY: libgbm's initialisers are the C library's own; each symbol is
                    // read as the type gbm.h declares for it.
                    unsafe {
                        let library = ::libloading::Library::new($crate::lazy::LIBRARY).ok()?;
                        Some(Table {
                            $($name: library
                                .get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(
                                    concat!(stringify!($name), "\0").as_bytes(),
                                )
                                .ok()
                                .map(|symbol| *symbol),)*
                            _library: library,
                        })
                    }
                })
                .as_ref()
        }

        $(
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                match table().and_then(|table| table.$name) {
                    // SAFETY: the caller keeps libgbm's contract for this function.
                    Some(function) => unsafe { function($($arg),*) },
                    None => $crate::lazy::functions!(@missing $name $($fallback)?),
                }
            }
        )*
    };
    (@missing $name:ident $fallback:ident) => {
        $fallback()
    };
    (@missing $name:ident) => {
        panic!(
            "{} is not in {}; install libgbm1 (Mesa 21.3 or later)",
            stringify!($name),
            $crate::lazy::LIBRARY
        )
    };
}

pub(crate) use functions;
