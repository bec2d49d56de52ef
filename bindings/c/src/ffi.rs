//! The one place the C ABI's rules are written: the panic boundary, argument checks,
//! out pointers and the error object. Every exported function is built from these.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::Value;

/// What a call returns: `COINORDER_OK` (0) or why it failed. Retired values are never reused.
///
/// A bad argument (NULL, not UTF-8, not JSON, or JSON that is not an object where one is
/// taken) sets `*err` with error code `PARAMETERS_MISSING` (http status 400) and a
/// message naming the argument: `"request_json: must be a JSON object"`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum coinorder_status {
    /// Success: the out pointers were written.
    COINORDER_OK = 0,
    /// A required pointer argument was NULL; `*err` names it.
    COINORDER_NULL_ARGUMENT = 1,
    /// A string argument was not valid UTF-8; `*err` names it.
    COINORDER_INVALID_UTF8 = 2,
    /// A JSON argument did not parse, or is not a JSON object where the function takes
    /// one; `*err` names it and says where. A member with a wrong value (`{"user_id":"x"}`)
    /// is the service's `COINORDER_ERROR` with `PARAMETERS_MISSING` naming the field, as
    /// over HTTP.
    COINORDER_INVALID_JSON = 3,
    /// The service refused or failed; `*err` has the spec's error code, message and HTTP status.
    COINORDER_ERROR = 4,
    /// A bug inside the library was caught at the boundary; the service is still usable.
    COINORDER_PANIC = 5,
}

/// A failure description (opaque), created by a failing call when its `err` argument is
/// not NULL and freed with `coinorder_error_free`.
#[allow(non_camel_case_types)]
pub struct coinorder_error {
    pub(crate) status: coinorder_status,
    pub(crate) code: CString,
    pub(crate) message: CString,
    pub(crate) http_status: u16,
    pub(crate) number: u32,
}

/// Why a call failed, before it crosses the boundary as a status and `coinorder_error`.
#[derive(Debug)]
pub struct CallError {
    status: coinorder_status,
    error: coinorder::Error,
}

impl CallError {
    /// A NULL pointer where one was required.
    pub fn null(argument: &str) -> Self {
        CallError {
            status: coinorder_status::COINORDER_NULL_ARGUMENT,
            error: coinorder::Error::invalid(argument, "must not be NULL"),
        }
    }

    /// A JSON argument that does not parse or has the wrong shape.
    pub fn invalid_json(argument: &str, why: impl Into<String>) -> Self {
        CallError { status: coinorder_status::COINORDER_INVALID_JSON, error: coinorder::Error::invalid(argument, why) }
    }

    /// A result that could not be rendered as JSON (a bug: every result renders).
    pub fn render(err: serde_json::Error) -> Self {
        coinorder::Error::new(coinorder::ErrorKind::Internal(format!("cannot render the result as JSON: {err}"))).into()
    }
}

impl From<coinorder::Error> for CallError {
    fn from(error: coinorder::Error) -> Self {
        CallError { status: coinorder_status::COINORDER_ERROR, error }
    }
}

/// Builds the C error object. The message is the error's own text (which names the field
/// and never holds a key or secret); a NUL inside it is cut off there.
fn error_object(status: coinorder_status, error: &coinorder::Error) -> coinorder_error {
    let code = error.code();
    let message = error.to_string();
    let message = CString::new(message.split('\0').next().unwrap_or_default()).unwrap_or_default();
    coinorder_error {
        status,
        code: CString::new(code.as_str()).unwrap_or_default(),
        message,
        http_status: code.http_status(),
        number: code.number(),
    }
}

/// The panic boundary every exported function runs in: turns the body's result into a
/// status, sets `*err` on failure (when `err` is not NULL), and catches any panic.
pub fn guard(err: *mut *mut coinorder_error, body: impl FnOnce() -> Result<(), CallError>) -> coinorder_status {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return coinorder_status::COINORDER_OK,
        Ok(Err(failure)) => failure,
        Err(_) => CallError {
            status: coinorder_status::COINORDER_PANIC,
            error: coinorder::Error::new(coinorder::ErrorKind::Internal(
                "a bug in coinorder was caught at the C boundary".to_string(),
            )),
        },
    };
    let status = failure.status;
    if !err.is_null() {
        // A panic while describing the failure leaves `*err` untouched; the status stands.
        if let Ok(object) = catch_unwind(AssertUnwindSafe(|| error_object(status, &failure.error))) {
            // SAFETY: the caller passes either NULL (checked above) or a writable pointer.
            unsafe { *err = Box::into_raw(Box::new(object)) };
        }
    }
    status
}

/// A borrowed, required UTF-8 string argument.
///
/// # Safety
/// `ptr` is NULL or points at a NUL-terminated string valid for the call.
pub unsafe fn text<'a>(ptr: *const c_char, argument: &str) -> Result<&'a str, CallError> {
    opt_text(ptr, argument)?.ok_or_else(|| CallError::null(argument))
}

/// A borrowed, optional UTF-8 string argument (NULL: `None`).
///
/// # Safety
/// As for [`text`].
pub unsafe fn opt_text<'a>(ptr: *const c_char, argument: &str) -> Result<Option<&'a str>, CallError> {
    if ptr.is_null() {
        return Ok(None);
    }
    CStr::from_ptr(ptr).to_str().map(Some).map_err(|_| CallError {
        status: coinorder_status::COINORDER_INVALID_UTF8,
        error: coinorder::Error::invalid(argument, "is not valid UTF-8"),
    })
}

/// A byte buffer argument, copied; NULL is allowed only with length 0.
///
/// # Safety
/// `ptr` is NULL or points at `len` readable bytes.
pub unsafe fn bytes(ptr: *const u8, len: usize, argument: &str) -> Result<Vec<u8>, CallError> {
    match (ptr.is_null(), len) {
        (true, 0) => Ok(Vec::new()),
        (true, _) => Err(CallError::null(argument)),
        (false, _) => Ok(std::slice::from_raw_parts(ptr, len).to_vec()),
    }
}

/// Parses a JSON argument; a syntax error says where.
pub fn json_arg(text: &str, argument: &str) -> Result<Value, CallError> {
    serde_json::from_str(text).map_err(|e| CallError::invalid_json(argument, format!("is not valid JSON ({e})")))
}

/// Parses a JSON argument that must be an object (a request, options, headers or a
/// query); anything else is `COINORDER_INVALID_JSON` naming the argument.
pub fn json_object(text: &str, argument: &str) -> Result<serde_json::Map<String, Value>, CallError> {
    match json_arg(text, argument)? {
        Value::Object(fields) => Ok(fields),
        _ => Err(CallError::invalid_json(argument, "must be a JSON object")),
    }
}

/// The members of a JSON object argument in the order sent, a name sent twice kept twice
/// (a map would keep only its last value, silently); anything but an object is
/// `COINORDER_INVALID_JSON` naming the argument.
pub fn json_members(text: &str, argument: &str) -> Result<Vec<(String, Value)>, CallError> {
    json_object(text, argument)?; // the syntax error, or "must be a JSON object"
    serde_json::from_str::<coinorder::JsonMembers>(text)
        .map(|members| members.0)
        .map_err(|e| CallError::invalid_json(argument, format!("is not valid JSON ({e})")))
}

/// A JSON object argument whose members are each sent once: a member sent twice is the
/// service's `PARAMETERS_MISSING` naming it ("user_id: sent more than once"), as over
/// HTTP, never its last value taken silently.
pub fn json_unique_object(text: &str, argument: &str) -> Result<serde_json::Map<String, Value>, CallError> {
    let mut object = serde_json::Map::new();
    for (name, value) in json_members(text, argument)? {
        if object.contains_key(&name) {
            return Err(coinorder::Error::invalid(name, "sent more than once").into());
        }
        object.insert(name, value);
    }
    Ok(object)
}

/// Copies a Rust string into a C string the caller frees with `coinorder_string_free`.
pub fn c_string(text: String) -> Result<CString, CallError> {
    // JSON escapes NUL; only a page body could hold one, and none does.
    CString::new(text)
        .map_err(|_| coinorder::Error::new(coinorder::ErrorKind::Internal("a NUL byte in the output".into())).into())
}

/// Checks an out pointer before the call does any work, so that a NULL one changes nothing.
pub fn need<T>(ptr: *mut T, argument: &str) -> Result<(), CallError> {
    if ptr.is_null() {
        return Err(CallError::null(argument));
    }
    Ok(())
}

/// Writes a result through an out pointer.
///
/// # Safety
/// `ptr` is NULL or writable.
pub unsafe fn out<T>(ptr: *mut T, argument: &str, value: T) -> Result<(), CallError> {
    if ptr.is_null() {
        return Err(CallError::null(argument));
    }
    *ptr = value;
    Ok(())
}

/// Renders a JSON result and hands it to the caller through `ptr` (freed with
/// `coinorder_string_free`). The pointer is checked before anything is allocated.
///
/// # Safety
/// `ptr` is NULL or writable.
pub unsafe fn json_out(ptr: *mut *mut c_char, argument: &str, value: &Value) -> Result<(), CallError> {
    if ptr.is_null() {
        return Err(CallError::null(argument));
    }
    json_text_out(ptr, argument, value.to_string())
}

/// Hands JSON text the core already wrote (the API's bodies, as `Service::handle` answers
/// them) to the caller through `ptr` (freed with `coinorder_string_free`), without a
/// round trip through a `Value`.
///
/// # Safety
/// `ptr` is NULL or writable.
pub unsafe fn json_text_out(ptr: *mut *mut c_char, argument: &str, json: String) -> Result<(), CallError> {
    if ptr.is_null() {
        return Err(CallError::null(argument));
    }
    let text = c_string(json)?;
    out(ptr, argument, text.into_raw())
}
