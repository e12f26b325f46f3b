// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/text_numbers against the C library (strtoll, strtod, snprintf in the "C"
// locale) and std::getline / operator>> as references, plus the rejections they would not make.
#include "topo/text_numbers.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

namespace torch_topo::topo {
namespace {

void expectInteger(const char* text, int base, long long want) {
  ParsedNumber<long long> r = parseInteger(text, base);
  ASSERT_TRUE(r) << text << ": " << toString(r.error);
  EXPECT_EQ(r.value, want) << text;
  EXPECT_EQ(r.length, std::string(text).size()) << text;
}

void expectIntegerError(const char* text, int base, NumberError want) {
  ParsedNumber<long long> r = parseInteger(text, base);
  EXPECT_EQ(r.error, want) << "'" << text << "' base " << base << " gave " << r.value;
}

TEST(TextNumbersTest, IntegersInEachBase) {
  expectInteger("0", 10, 0);
  expectInteger("4095", 10, 4095);
  expectInteger("-17", 10, -17);
  expectInteger("007", 10, 7);
  expectInteger("10de", 16, 0x10de);
  expectInteger("FFFF", 16, 0xffff);
  expectInteger("-ff", 16, -255);
  // Base 0 follows strtol: NCCL writes class="0x068000" and reads it back that way.
  expectInteger("0x068000", 0, 0x068000);
  expectInteger("0X1F", 0, 31);
  expectInteger("010", 0, 8);
  expectInteger("-0x10", 0, -16);
  expectInteger("0", 0, 0);
  expectInteger("42", 0, 42);
}

TEST(TextNumbersTest, IntegerLimitsAndOverflow) {
  expectInteger("9223372036854775807", 10, LLONG_MAX);
  expectInteger("-9223372036854775808", 10, LLONG_MIN);
  expectInteger("7fffffffffffffff", 16, LLONG_MAX);
  expectIntegerError("9223372036854775808", 10, NumberError::kOutOfRange);
  expectIntegerError("-9223372036854775809", 10, NumberError::kOutOfRange);
  expectIntegerError("99999999999999999999", 10, NumberError::kOutOfRange);
  expectIntegerError("8000000000000000", 16, NumberError::kOutOfRange);
  expectIntegerError("0x7fffffffffffffff0", 0, NumberError::kOutOfRange);
}

TEST(TextNumbersTest, IntegerRejectsJunkThatStrtolAccepts) {
  expectIntegerError("", 10, NumberError::kEmpty);
  expectIntegerError("-", 10, NumberError::kInvalid);
  expectIntegerError("abc", 10, NumberError::kInvalid);
  expectIntegerError(" 12", 10, NumberError::kInvalid);  // strtoll skips the space
  expectIntegerError("+12", 10, NumberError::kInvalid);  // strtoll takes the sign
  expectIntegerError("--1", 10, NumberError::kInvalid);
  expectIntegerError("12 ", 10, NumberError::kTrailingText);
  expectIntegerError("12abc", 10, NumberError::kTrailingText);
  expectIntegerError("1.5", 10, NumberError::kTrailingText);
  expectIntegerError("1,000", 10, NumberError::kTrailingText);
  expectIntegerError("0x10", 16, NumberError::kTrailingText);  // base 16 takes no prefix
  expectIntegerError("1g", 16, NumberError::kTrailingText);
  expectIntegerError("08", 0, NumberError::kTrailingText);  // octal, as strtol reads it
  expectIntegerError("0x", 0, NumberError::kTrailingText);  // strtol: "0", then "x"
  EXPECT_STREQ(toString(NumberError::kTrailingText), "text after the number");
  EXPECT_STREQ(toString(NumberError::kOutOfRange), "out of range");
}

TEST(TextNumbersTest, LeadingNumbersSayWhereTheyEnd) {
  ParsedNumber<long long> i = parseLeadingInteger("2.0");
  ASSERT_TRUE(i);
  EXPECT_EQ(i.value, 2);
  EXPECT_EQ(i.length, 1u);
  ParsedNumber<double> d = parseLeadingDouble("32.0 GT/s PCIe");
  ASSERT_TRUE(d);
  EXPECT_EQ(d.value, 32.0);
  EXPECT_EQ(d.length, 4u);
  d = parseLeadingDouble("100 Gb/sec (4X EDR)");
  ASSERT_TRUE(d);
  EXPECT_EQ(d.value, 100.0);
  EXPECT_EQ(d.length, 3u);
  EXPECT_EQ(parseLeadingDouble("GT/s").error, NumberError::kInvalid);
  EXPECT_EQ(parseLeadingInteger("").error, NumberError::kEmpty);
  EXPECT_EQ(parseLeadingInteger("99999999999999999999 x").error, NumberError::kOutOfRange);
}

TEST(TextNumbersTest, DoublesMatchStrtodAndRefuseNonFinite) {
  for (const char* text : {"0", "15.753846", "0.000000", "-2.5e3", "1e308", ".5", "1.",
                           "25000", "2.2250738585072014e-308", "123456789012345678901234"}) {
    ParsedNumber<double> r = parseDouble(text);
    ASSERT_TRUE(r) << text << ": " << toString(r.error);
    EXPECT_EQ(r.value, std::strtod(text, nullptr)) << text;
  }
  EXPECT_EQ(parseDouble("").error, NumberError::kEmpty);
  EXPECT_EQ(parseDouble("1e309").error, NumberError::kOutOfRange);
  EXPECT_EQ(parseDouble("-1e309").error, NumberError::kOutOfRange);
  EXPECT_EQ(parseDouble("inf").error, NumberError::kOutOfRange);
  EXPECT_EQ(parseDouble("NaN").error, NumberError::kInvalid);
  EXPECT_EQ(parseDouble("+1").error, NumberError::kInvalid);
  EXPECT_EQ(parseDouble(" 1").error, NumberError::kInvalid);
  EXPECT_EQ(parseDouble("0x1p3").error, NumberError::kTrailingText);  // "0", then "x1p3"
  EXPECT_EQ(parseDouble("1,5").error, NumberError::kTrailingText);    // ',' is never the point
  EXPECT_EQ(parseDouble("1.5 ").error, NumberError::kTrailingText);
  EXPECT_EQ(parseDouble("1.5.2").error, NumberError::kTrailingText);
}

TEST(TextNumbersTest, RandomValuesRoundTripThroughTheCLibrary) {
  std::mt19937_64 rng(16);
  char buf[64];
  for (int i = 0; i < 2000; ++i) {
    const unsigned long long bits = rng();
    const long long v = static_cast<long long>(bits);
    std::snprintf(buf, sizeof(buf), "%lld", v);
    ParsedNumber<long long> dec = parseInteger(buf);
    ASSERT_TRUE(dec) << buf;
    EXPECT_EQ(dec.value, v);
    std::snprintf(buf, sizeof(buf), "%llx", bits >> 1);
    EXPECT_EQ(parseInteger(buf, 16).value, std::strtoll(buf, nullptr, 16)) << buf;
    std::snprintf(buf, sizeof(buf), "%llx", bits);
    EXPECT_EQ(formatHex(bits), buf);

    const double d = std::ldexp(std::uniform_real_distribution<double>(-1.0, 1.0)(rng),
                                std::uniform_int_distribution<int>(-300, 300)(rng));
    std::snprintf(buf, sizeof(buf), "%.17g", d);
    ParsedNumber<double> back = parseDouble(buf);
    ASSERT_TRUE(back) << buf;
    EXPECT_EQ(back.value, d) << buf;
    std::snprintf(buf, sizeof(buf), "%.6g", d);
    EXPECT_EQ(formatDouble(d), buf);
    const double f = std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
    std::snprintf(buf, sizeof(buf), "%.1f", f);
    EXPECT_EQ(formatFixed(f, 1), buf);
  }
}

TEST(TextNumbersTest, FormattingMatchesPrintf) {
  EXPECT_EQ(formatDouble(15.753846), "15.7538");
  EXPECT_EQ(formatDouble(1234567.0), "1.23457e+06");
  EXPECT_EQ(formatDouble(0.5), "0.5");
  EXPECT_EQ(formatDouble(64.0), "64");
  EXPECT_EQ(formatFixed(16.0, 1), "16.0");
  EXPECT_EQ(formatFixed(2.5, 1), "2.5");
  EXPECT_EQ(formatHex(0x10de), "10de");
  EXPECT_EQ(formatHex(0xff, 8), "000000ff");
  EXPECT_EQ(formatHex(0x123456789, 8), "123456789");
  std::string s;
  appendText(&s, "n=");
  appendText(&s, std::string("x"));
  appendText(&s, ' ');
  appendText(&s, size_t{1} << 40);
  appendText(&s, ',');
  appendText(&s, -3);
  appendText(&s, ',');
  appendText(&s, 0.25);
  EXPECT_EQ(s, "n=x 1099511627776,-3,0.25");
}

std::vector<std::string> getlineFields(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string f; std::getline(in, f, sep);) out.push_back(f);
  return out;
}

std::vector<std::string> streamWords(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(TextNumbersTest, SplittingMatchesGetlineAndStreamExtraction) {
  for (const char* text : {"", ",", "a", "a,b", "a,b,", "a,,b", ",a", ",,", "0-3,8\n"}) {
    EXPECT_EQ(splitList(text, ','), getlineFields(text, ',')) << "'" << text << "'";
  }
  EXPECT_EQ(splitList("l1\r\nl2\n\nl4\n", '\n'), getlineFields("l1\r\nl2\n\nl4\n", '\n'));
  for (const char* text : {"", "  ", "a", " a  b\tc\n", "0 25000\r\n\v\f 1e3 "}) {
    EXPECT_EQ(splitWords(text), streamWords(text)) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace torch_topo::topo
