// Tests of lt::lower::c_expr: the C-family rendering of elementwise primitives keeps the IR's
// semantics in the text it produces (wrapping integer arithmetic, guarded division, NaN-aware
// maximum/minimum, saturating casts, literals converted as cast converts), per dialect.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lazytensor/lower/c_expr.hpp"
#include "lazytensor/lower/error.hpp"

namespace {

namespace cx = lt::lower::c_expr;

const cx::Dialect kC;  // the defaults: plain C types, inline saturating casts
const cx::Dialect kCl = {.u32 = "uint",
                         .u64 = "ulong",
                         .boolean = "uchar",
                         .u16 = "ushort",
                         .bits_of_f32 = "as_uint",
                         .f32_of_bits = "as_float",
                         .saturating_cast = "convert_%s_sat_rtz"};

TEST(CExpr, TypesFollowTheDialectAndStoreBf16AndF16AsBits) {
  EXPECT_EQ(cx::type(LT_DTYPE_F32, kC), "float");
  EXPECT_EQ(cx::type(LT_DTYPE_I64, kC), "long");
  EXPECT_EQ(cx::type(LT_DTYPE_BOOL, kC), "unsigned char");
  EXPECT_EQ(cx::type(LT_DTYPE_BOOL, kCl), "uchar");
  EXPECT_EQ(cx::type(LT_DTYPE_BF16, kC), "unsigned short");
  EXPECT_EQ(cx::type(LT_DTYPE_F16, kCl), "ushort");
  try {
    cx::type(LT_DTYPE_INVALID, kC);
    FAIL() << "an invalid dtype has no C type";
  } catch (const lt::lower::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_UNSUPPORTED);
  }
}

TEST(CExpr, StorageTypesConvertThroughF32) {
  EXPECT_EQ(cx::cast("x", LT_DTYPE_BF16, LT_DTYPE_F32, kC), "lt_bf16_to_f32(x)");
  EXPECT_EQ(cx::cast("x", LT_DTYPE_F32, LT_DTYPE_F16, kC), "lt_f32_to_f16(x)");
  EXPECT_EQ(cx::cast("x", LT_DTYPE_I32, LT_DTYPE_BF16, kCl), "lt_f32_to_bf16(((float)(x)))");
  EXPECT_EQ(cx::cast("x", LT_DTYPE_F16, LT_DTYPE_BF16, kC), "lt_f32_to_bf16(lt_f16_to_f32(x))");
  // Literals are the rounded bits: 1.0 = 0x3F80 in bf16, 0x3C00 in f16; 65520 overflows f16.
  EXPECT_EQ(cx::literal(1.0, LT_DTYPE_BF16, kC), "((unsigned short)0x3F80)");
  EXPECT_EQ(cx::literal(1.0, LT_DTYPE_F16, kCl), "((ushort)0x3C00)");
  EXPECT_EQ(cx::literal(65520.0, LT_DTYPE_F16, kCl), "((ushort)0x7C00)");
  const std::string fns = cx::storage_functions(kCl, "inline");
  for (const char* f : {"lt_bf16_to_f32", "lt_f32_to_bf16", "lt_f16_to_f32", "lt_f32_to_f16"})
    EXPECT_NE(
        fns.find(std::string("inline ") +
                 (std::string(f).find("to_f32") != std::string::npos ? "float " : "ushort ") + f),
        std::string::npos)
        << f << " missing from:\n"
        << fns;
  EXPECT_NE(fns.find("as_uint(x)"), std::string::npos);  // the dialect's bit casts, no union
  EXPECT_EQ(fns.find("union"), std::string::npos);
  EXPECT_NE(cx::storage_functions(kC).find("union"), std::string::npos);
}

TEST(CExpr, LiteralsAreConvertedAsCastConverts) {
  EXPECT_EQ(cx::literal(1, LT_DTYPE_F32, kC), "(1.0f)");
  EXPECT_EQ(cx::literal(0.1, LT_DTYPE_F32, kC), "(0.100000001f)");  // rounded to f32 first
  EXPECT_EQ(cx::literal(0.1, LT_DTYPE_F64, kC), "(0.10000000000000001)");
  EXPECT_EQ(cx::literal(1e30, LT_DTYPE_F64, kC), "(1e+30)");  // an exponent needs no ".0"
  EXPECT_EQ(cx::literal(NAN, LT_DTYPE_F32, kC), "((float)NAN)");
  EXPECT_EQ(cx::literal(-INFINITY, LT_DTYPE_F64, kC), "(-(double)INFINITY)");
  EXPECT_EQ(cx::literal(-2.9, LT_DTYPE_I32, kC), "((int)-2)");          // truncates toward zero
  EXPECT_EQ(cx::literal(1e10, LT_DTYPE_I32, kC), "((int)2147483647)");  // saturates
  EXPECT_EQ(cx::literal(-INFINITY, LT_DTYPE_I32, kC), "((int)-2147483648)");
  EXPECT_EQ(cx::literal(NAN, LT_DTYPE_I64, kC), "((long)0L)");
  EXPECT_EQ(cx::literal(1e300, LT_DTYPE_I64, kC), "((long)9223372036854775807L)");
  EXPECT_EQ(cx::literal(-1e300, LT_DTYPE_I64, kC), "((long)(-9223372036854775807L - 1))");
  EXPECT_EQ(cx::literal(0.5, LT_DTYPE_BOOL, kCl), "((uchar)1)");
  EXPECT_EQ(cx::literal(NAN, LT_DTYPE_BOOL, kCl), "((uchar)1)");  // NaN != 0
}

TEST(CExpr, CastsTruncateSaturateAndTestForZero) {
  EXPECT_EQ(cx::cast("x", LT_DTYPE_F32, LT_DTYPE_F32, kC), "x");
  EXPECT_EQ(cx::cast("x", LT_DTYPE_F32, LT_DTYPE_BOOL, kCl), "((uchar)((x) != 0))");
  EXPECT_EQ(cx::cast("x", LT_DTYPE_I32, LT_DTYPE_F64, kC), "((double)(x))");
  EXPECT_EQ(cx::cast("x", LT_DTYPE_F32, LT_DTYPE_I64, kCl), "convert_long_sat_rtz(x)");
  // Without a conversion function: NaN -> 0, then the bounds, then truncation.
  EXPECT_EQ(cx::cast("x", LT_DTYPE_F32, LT_DTYPE_I32, kC),
            "((x) != (x) ? ((int)0) : (x) >= (2.14748365e+09f) ? ((int)2147483647) : (x) <= "
            "(-2.14748365e+09f) ? ((int)-2147483648) : (int)(x))");
}

TEST(CExpr, IntegerArithmeticWrapsAndDivisionIsGuarded) {
  EXPECT_EQ(cx::binary("add", "a", "b", LT_DTYPE_I32, kCl), "((int)((uint)a + (uint)b))");
  EXPECT_EQ(cx::binary("mul", "a", "b", LT_DTYPE_I64, kC),
            "((long)((unsigned long)a * (unsigned long)b))");
  EXPECT_EQ(cx::binary("sub", "a", "b", LT_DTYPE_F32, kC), "(a - b)");
  EXPECT_EQ(cx::binary("div", "a", "b", LT_DTYPE_I32, kCl),
            "(b == 0 ? (int)0 : (b == -1 ? (int)(-(uint)a) : a / b))");
  EXPECT_EQ(cx::binary("div", "a", "b", LT_DTYPE_F64, kC), "(a / b)");
  EXPECT_EQ(cx::unary("neg", "a", LT_DTYPE_I32, kCl), "((int)(-(uint)(a)))");
  EXPECT_EQ(cx::unary("abs", "a", LT_DTYPE_F32, kC), "fabs(a)");
}

TEST(CExpr, MaximumPropagatesNanAndComparisonsGiveTheBooleanType) {
  EXPECT_EQ(cx::binary("maximum", "a", "b", LT_DTYPE_F32, kC), "((a > b || a != a) ? a : b)");
  EXPECT_EQ(cx::binary("minimum", "a", "b", LT_DTYPE_I32, kC), "(a < b ? a : b)");
  EXPECT_EQ(cx::binary("le", "a", "b", LT_DTYPE_F32, kCl), "((uchar)(a <= b))");
  EXPECT_EQ(cx::binary("or", "a", "b", LT_DTYPE_BOOL, kCl), "((uchar)(a || b))");
  EXPECT_EQ(cx::unary("not", "a", LT_DTYPE_BOOL, kCl), "((uchar)!(a))");
  // tanh is +-1 exactly where it rounds to +-1 (OpenCL's tanh gave 0.99999994: issue #29).
  EXPECT_EQ(cx::unary("tanh", "a", LT_DTYPE_F32, kC),
            "(fabs(a) > 9.011f ? copysign((float)1, a) : tanh(a))");
  EXPECT_EQ(cx::unary("tanh", "a", LT_DTYPE_F64, kC),
            "(fabs(a) > 19.062 ? copysign((double)1, a) : tanh(a))");
}

TEST(CExpr, RendersExactlyThePrimitivesItNames) {
  for (const char* op : {"neg", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "not"})
    EXPECT_TRUE(cx::is_unary(op)) << op;
  for (const char* op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt",
                         "le", "gt", "ge", "and", "or"})
    EXPECT_TRUE(cx::is_binary(op)) << op;
  // Composites are the decompositions' business (lower/decompose.hpp), not rendered here.
  for (const char* op : {"relu", "sigmoid", "gelu", "rsqrt", "erf"}) {
    EXPECT_FALSE(cx::is_unary(op)) << op;
    EXPECT_THROW(cx::unary(op, "a", LT_DTYPE_F32, kC), lt::lower::Error) << op;
  }
  EXPECT_THROW(cx::binary("atan2", "a", "b", LT_DTYPE_F32, kC), lt::lower::Error);
}

TEST(CExpr, ReductionsStartAtTheIdentityAndAccumulateWithTheIrRules) {
  EXPECT_EQ(cx::reduce_init("sum", LT_DTYPE_F32, kC), "(0.0f)");
  EXPECT_EQ(cx::reduce_init("mean", LT_DTYPE_F64, kC), "(0.0)");
  EXPECT_EQ(cx::reduce_init("sum", LT_DTYPE_I32, kC), "((int)0)");
  // max starts at -inf; for integers the infinity saturates to the type's limit.
  EXPECT_EQ(cx::reduce_init("max", LT_DTYPE_F32, kCl), "(-(float)INFINITY)");
  EXPECT_EQ(cx::reduce_init("min", LT_DTYPE_I32, kCl), "((int)2147483647)");
  EXPECT_EQ(cx::reduce_init("max", LT_DTYPE_I64, kCl), "((long)(-9223372036854775807L - 1))");
  EXPECT_EQ(cx::reduce_step("sum", "acc", "x", LT_DTYPE_F32, kC), "(acc + x)");
  EXPECT_EQ(cx::reduce_step("max", "acc", "x", LT_DTYPE_F32, kC),
            "((acc > x || acc != acc) ? acc : x)");
  EXPECT_EQ(cx::reduce_step("min", "acc", "x", LT_DTYPE_I32, kC), "(acc < x ? acc : x)");
  EXPECT_THROW(cx::reduce_init("argmax", LT_DTYPE_F32, kC), lt::lower::Error);
  EXPECT_THROW(cx::reduce_step("prod", "acc", "x", LT_DTYPE_F32, kC), lt::lower::Error);
}

TEST(CExpr, WindowConditionBoundsOnlyTheDimsPadAndConcatRestrict) {
  using lt::lower::View;
  const lt::lower::Shape shape = {2, 3}, before = {0, 2}, after = {0, 1};
  // [2, 3] padded by 2 before and 1 after along dim 1: valid in [2, 5) of 6.
  const View padded = View::dense(shape).pad(before, after, 0.0);
  EXPECT_EQ(cx::in_window(padded, {"i0", "i1"}), "(i1) >= 2L && (i1) < 5L");
  // The first part of a concat along dim 0 (extent 2 of 5): only an upper bound.
  const View part = View::dense(shape).concat_part(0, 0, 5);
  EXPECT_EQ(cx::in_window(part, {"i0", "i1"}), "(i0) < 2L");
  EXPECT_EQ(cx::in_window(View::dense(shape), {"i0", "i1"}), "");
}

}  // namespace
