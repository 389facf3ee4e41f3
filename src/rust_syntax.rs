//! Print an `rlx_ir::Op` as a Rust expression, for the generated crates.
//!
//! The crate emitter must not decide any mapping a second time: it prints the
//! very `Op` value the bundle is built from. This module is a serde
//! `Serializer` that writes Rust syntax instead of JSON, so it knows every
//! field's real type (an `f32` prints as a float, a `Vec` as `vec![..]`, an
//! `Option` as `Some(..)`), and any op RLX adds later prints with no change
//! here. The compiler checks the result when the generated crate builds.
//!
//! Fixed-size arrays (`[usize; 2]`) reach serde as tuples; `Op` has no tuple
//! fields in RLX 0.2.19, so tuples print as arrays. Constant payloads print as
//! a call the emitter defines (`constant(..)`), never as a byte literal here.

use std::collections::BTreeSet;
use std::fmt::{self, Display};

use rlx_ir::Op;
use serde::ser::{self, Serialize};

use crate::error::CoreError;

/// A Rust expression and the type names it mentions (for the `use` list).
#[derive(Debug, Default)]
pub struct RustExpr {
    pub code: String,
    pub types: BTreeSet<String>,
}

/// Why an op could not be printed.
#[derive(Debug)]
pub struct PrintError(String);

impl Display for PrintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PrintError {}

impl ser::Error for PrintError {
    fn custom<T: Display>(msg: T) -> Self {
        PrintError(msg.to_string())
    }
}

/// Print `op`. A `Constant` prints as `Op::Constant { data: <data_expr> }` so its
/// bytes can live in a data file instead of the source.
pub fn op_to_rust(op: &Op, data_expr: &str) -> Result<RustExpr, PrintError> {
    let mut out = Printer::default();
    if let Op::Constant { .. } = op {
        out.types.insert("Op".into());
        out.code = format!("Op::Constant {{ data: {data_expr} }}");
        return Ok(RustExpr {
            code: out.code,
            types: out.types,
        });
    }
    op.serialize(&mut out)?;
    Ok(RustExpr {
        code: out.code,
        types: out.types,
    })
}

/// Op JSON (rlx-ir's serde form) → Rust expression; errors name the op.
pub fn op_json_to_rust(op_json: &str, data_expr: &str) -> Result<RustExpr, CoreError> {
    let op: Op = serde_json::from_str(op_json)
        .map_err(|e| CoreError::Check(format!("op {op_json} is not a valid rlx_ir::Op: {e}")))?;
    op_to_rust(&op, data_expr)
        .map_err(|e| CoreError::Check(format!("cannot print op {op_json} as Rust: {e}")))
}

#[derive(Default)]
struct Printer {
    code: String,
    types: BTreeSet<String>,
}

impl Printer {
    /// A type name, remembered for the `use` list.
    fn ty(&mut self, name: &str) {
        self.types.insert(name.to_string());
        self.code.push_str(name);
    }

    fn path(&mut self, ty: &str, variant: &str) {
        self.ty(ty);
        self.code.push_str("::");
        self.code.push_str(variant);
    }

    fn float(&mut self, v: f64, ty: &str) {
        if v.is_nan() {
            self.code.push_str(&format!("{ty}::NAN"));
        } else if v.is_infinite() {
            let sign = if v < 0.0 { "NEG_" } else { "" };
            self.code.push_str(&format!("{ty}::{sign}INFINITY"));
        } else {
            self.code.push_str(&format!("{v:?}"));
        }
    }
}

/// Comma-separated items between fixed delimiters.
struct Seq<'a> {
    p: &'a mut Printer,
    first: bool,
    close: &'static str,
}

impl<'a> Seq<'a> {
    fn open(p: &'a mut Printer, open: &str, close: &'static str) -> Self {
        p.code.push_str(open);
        Seq {
            p,
            first: true,
            close,
        }
    }

    fn sep(&mut self) {
        if !self.first {
            self.p.code.push_str(", ");
        }
        self.first = false;
    }

    fn item<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), PrintError> {
        self.sep();
        v.serialize(&mut *self.p)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> Result<(), PrintError> {
        self.sep();
        self.p.code.push_str(key);
        self.p.code.push_str(": ");
        v.serialize(&mut *self.p)
    }

    fn done(self) -> Result<(), PrintError> {
        self.p.code.push_str(self.close);
        Ok(())
    }
}

macro_rules! plain {
    ($($method:ident: $ty:ty),*) => {
        $(fn $method(self, v: $ty) -> Result<(), PrintError> {
            self.code.push_str(&v.to_string());
            Ok(())
        })*
    };
}

impl<'a> ser::Serializer for &'a mut Printer {
    type Ok = ();
    type Error = PrintError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = ser::Impossible<(), PrintError>;
    type SerializeStruct = Seq<'a>;
    type SerializeStructVariant = Seq<'a>;

    plain!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64);

    fn serialize_f32(self, v: f32) -> Result<(), PrintError> {
        if v.is_finite() {
            self.code.push_str(&format!("{v:?}"));
        } else {
            self.float(f64::from(v), "f32");
        }
        Ok(())
    }

    fn serialize_f64(self, v: f64) -> Result<(), PrintError> {
        self.float(v, "f64");
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), PrintError> {
        self.code.push_str(&format!("{v:?}"));
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Result<(), PrintError> {
        // Debug escaping yields a valid Rust string literal for any input.
        self.code.push_str(&format!("String::from({v:?})"));
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), PrintError> {
        self.code.push_str(&format!("vec!{v:?}"));
        Ok(())
    }

    fn serialize_none(self) -> Result<(), PrintError> {
        self.code.push_str("None");
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), PrintError> {
        self.code.push_str("Some(");
        v.serialize(&mut *self)?;
        self.code.push(')');
        Ok(())
    }

    fn serialize_unit(self) -> Result<(), PrintError> {
        self.code.push_str("()");
        Ok(())
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<(), PrintError> {
        self.ty(name);
        Ok(())
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), PrintError> {
        self.path(name, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<(), PrintError> {
        self.ty(name);
        self.code.push('(');
        v.serialize(&mut *self)?;
        self.code.push(')');
        Ok(())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), PrintError> {
        self.path(name, variant);
        self.code.push('(');
        v.serialize(&mut *self)?;
        self.code.push(')');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, PrintError> {
        Ok(Seq::open(self, "vec![", "]"))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Seq<'a>, PrintError> {
        Ok(Seq::open(self, "[", "]"))
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, PrintError> {
        self.ty(name);
        Ok(Seq::open(self, "(", ")"))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, PrintError> {
        self.path(name, variant);
        Ok(Seq::open(self, "(", ")"))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, PrintError> {
        Err(PrintError("maps have no Rust literal form".into()))
    }

    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Seq<'a>, PrintError> {
        self.ty(name);
        Ok(Seq::open(self, " { ", " }"))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, PrintError> {
        self.path(name, variant);
        Ok(Seq::open(self, " { ", " }"))
    }
}

/// The serde compound traits all print comma-separated items into a `Seq`.
macro_rules! items {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = PrintError;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), PrintError> {
                self.item(v)
            }
            fn end(self) -> Result<(), PrintError> {
                self.done()
            }
        }
    )*};
}

macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = PrintError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), PrintError> {
                self.field(key, v)
            }
            fn end(self) -> Result<(), PrintError> {
                self.done()
            }
        }
    )*};
}

items!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);
fields!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use super::*;

    fn print(json: &str) -> String {
        op_json_to_rust(json, "data").unwrap().code
    }

    #[test]
    fn prints_unit_newtype_and_struct_variants() {
        assert_eq!(print(r#""MatMul""#), "Op::MatMul");
        assert_eq!(
            print(r#"{"Activation": "Gelu"}"#),
            "Op::Activation(Activation::Gelu)"
        );
        let conv = print(
            r#"{"Conv": {"kernel_size": [3, 3], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 2}}"#,
        );
        assert_eq!(
            conv,
            "Op::Conv { kernel_size: vec![3, 3], stride: vec![1, 1], padding: vec![0, 0], dilation: vec![1, 1], groups: 2 }"
        );
    }

    #[test]
    fn floats_print_with_their_type_and_non_finite_as_constants() {
        let ln = print(r#"{"LayerNorm": {"axis": -1, "eps": 1e-5}}"#);
        assert!(ln.contains("eps: 1e-5"), "{ln}");
        let mut p = Printer::default();
        ser::Serializer::serialize_f32(&mut p, f32::NEG_INFINITY).unwrap();
        assert_eq!(p.code, "f32::NEG_INFINITY");
    }

    #[test]
    fn constants_print_the_given_data_expression() {
        let c =
            op_json_to_rust(r#"{"Constant": {"data": [0, 0, 128, 63]}}"#, "data(\"c1\")").unwrap();
        assert_eq!(c.code, "Op::Constant { data: data(\"c1\") }");
    }

    #[test]
    fn types_are_collected_for_the_use_list() {
        let e = op_json_to_rust(r#"{"Cast": {"to": "I64"}}"#, "").unwrap();
        assert_eq!(e.code, "Op::Cast { to: DType::I64 }");
        assert!(e.types.contains("DType") && e.types.contains("Op"));
    }
}
