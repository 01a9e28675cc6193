// The chat-template interpreter construct by construct: whitespace control,
// statements, expressions, filters, tests, methods, and the errors (one line
// naming the construct and the template line).
#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"
#include "chat/evaluator.h"

namespace mt::chat {
namespace interpreter_test {

std::string render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  ChatTemplate t(src, "<s>", "</s>");
  RenderOptions o;
  o.extra = vars;
  o.now_epoch_s = 1721995200;  // 2024-07-26 12:00:00 UTC
  return t.render(nlohmann::ordered_json::array(), o);
}

// The message of the TemplateError that loading (or rendering) `src` throws.
std::string error_of(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  try {
    render(src, vars);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatInterpreter, TextAndOutput) {
  EXPECT_EQ(render("hello"), "hello");
  EXPECT_EQ(render("a{{ 1 + 2 }}b"), "a3b");
  EXPECT_EQ(render("{{ 'x' }}{{ \"y\" }}"), "xy");
  EXPECT_EQ(render("{{ none }}{{ undefined_name }}|"), "|");
  EXPECT_EQ(render("{{ true }} {{ false }} {{ 2.0 }} {{ 2.5 }} {{ -3 }}"), "true false 2.0 2.5 -3");
  EXPECT_EQ(render("{{ [1, 'a'] }} {{ {'k': [true, none]} }}"), "[1, \"a\"] {\"k\": [true, null]}");
  EXPECT_EQ(render("line\n"), "line");  // the one trailing newline is dropped
  EXPECT_EQ(render("{# a comment #}x"), "x");
}

TEST(ChatInterpreter, StringEscapes) {
  EXPECT_EQ(render("{{ 'a\\nb\\t\\'\\\\' }}"), "a\nb\t'\\");
  EXPECT_EQ(render("{{ '\\u00e9\\x41' }}"), "\xC3\xA9" "A");
  EXPECT_EQ(render("{{ 'a' 'b' }}"), "ab");
}

TEST(ChatInterpreter, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a \n{%- if true -%}\n  b  \n{%- endif -%}\n c"), "abc");
  EXPECT_EQ(render("x {#- c -#} y"), "xy");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the
  // indentation before one goes; expressions keep both.
  EXPECT_EQ(render("{% if true %}\n    yes\n    {% endif %}\nend"), "    yes\nend");
  EXPECT_EQ(render("  {{ 'e' }}\nz"), "  e\nz");
  EXPECT_EQ(render("a {% if true %}b{% endif %}"), "a b");  // not at a line start: kept
}

TEST(ChatInterpreter, IfElifElse) {
  const std::string t = "{% if x == 1 %}one{% elif x == 2 %}two{% elif x > 5 %}big{% else %}other{% endif %}";
  EXPECT_EQ(render(t, {{"x", 1}}), "one");
  EXPECT_EQ(render(t, {{"x", 2}}), "two");
  EXPECT_EQ(render(t, {{"x", 9}}), "big");
  EXPECT_EQ(render(t, {{"x", 3}}), "other");
  EXPECT_EQ(render("{% if [] %}y{% else %}n{% endif %}{% if {'a': 1} %}y{% endif %}{% if '' %}y{% endif %}"), "ny");
}

TEST(ChatInterpreter, ForLoopVariables) {
  const std::string t =
      "{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.length }}{{ loop.revindex0 }}"
      "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ x }};{% endfor %}";
  EXPECT_EQ(render(t, {{"xs", {"a", "b", "c"}}}), "013" "2" "Fa;123" "1" "b;233" "0" "Lc;");
  EXPECT_EQ(render("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", {{"xs", nlohmann::ordered_json::array()}}), "empty");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }},{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}),
            "a=1,b=2,");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"), "2242");
  EXPECT_EQ(render("{% for x in [1,2,3,4] %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "12");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "13");
  EXPECT_EQ(render("{% for x in messages[::-1] %}{{ x }}{% endfor %}"), "");
}

TEST(ChatInterpreter, SetScopesAndNamespace) {
  EXPECT_EQ(render("{% set a = 1 %}{% set b, c = [2, 3] %}{{ a }}{{ b }}{{ c }}"), "123");
  // A set inside a loop stays in the loop; a namespace attribute does not.
  EXPECT_EQ(render("{% set n = 0 %}{% for x in [1,2] %}{% set n = n + x %}{% endfor %}{{ n }}"), "0");
  EXPECT_EQ(render("{% set ns = namespace(n=0, s='') %}{% for x in [1,2] %}{% set ns.n = ns.n + x %}"
                   "{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }}/{{ ns.s }}"),
            "3/12");
  EXPECT_EQ(render("{% set block %}a{{ 1 }}b{% endset %}[{{ block }}]"), "[a1b]");
}

TEST(ChatInterpreter, Expressions) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 3 * 'ab' }}"),
            "3 -4 1 2 3.5 1024 ababab");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none is none }}"), "7 9 a1true");
  EXPECT_EQ(render("{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'x' if 1 > 2 else 'y' }} [{{ 'x' if false }}]"),
            "ab [1, 2] y []");
  EXPECT_EQ(render("{{ 1 and 'b' }} {{ 0 or 'c' }} {{ not 0 }} {{ not 1 == 1 }}"), "b c true false");
  EXPECT_EQ(render("{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "true true true true");
  EXPECT_EQ(render("{{ d.a.b }} {{ d['a']['b'] }} {{ d.missing.deeper is defined }} {{ xs[-1] }} {{ xs.0 }}",
                   {{"d", {{"a", {{"b", "B"}}}}}, {"xs", {1, 2, 3}}}),
            "B B false 3 1");
  EXPECT_EQ(render("{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ 'hello'[1:3] }} {{ 'abc'[::-1] }}",
                   {{"xs", {1, 2, 3}}}),
            "[2, 3] [1, 2] [3, 2, 1] [1, 3] el cba");
}

TEST(ChatInterpreter, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ n is none }}{{ x is not none }}",
                   {{"x", 1}, {"n", nullptr}}),
            "truefalsetruetruetrue");
  EXPECT_EQ(render("{{ 's' is string }}{{ 1 is string }}{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}"
                   "{{ 1 is number }}{{ 1 is integer }}{{ 1.5 is float }}{{ true is boolean }}{{ false is false }}"),
            "truefalsetruefalsetruetruetruetruetruetrue");
  EXPECT_EQ(render("{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is eq 'a' }}{{ 2 is gt(1) }}"),
            "truefalsetruetruetrue");
}

TEST(ChatInterpreter, Filters) {
  EXPECT_EQ(render("[{{ '  a b \n' | trim }}] {{ 'héllo' | length }} {{ [1,2] | length }} {{ 'aB' | upper }}"
                   "{{ 'aB' | lower }}"),
            "[a b] 5 2 ABab");
  EXPECT_EQ(render("{{ {'a': [1, 'é', none, true, 1.5]} | tojson }}"), "{\"a\": [1, \"é\", null, true, 1.5]}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ 'q\"\\n' | tojson }}"), "\"q\\\"\\n\"");
  EXPECT_EQ(render("{{ 3 | string ~ 'x' }} {{ x | default('d') }} {{ '' | default('d', true) }} {{ 0 | default(5) }}"),
            "3x d d 0");
  EXPECT_EQ(render("{{ [1,2,3] | first }}{{ [1,2,3] | last }} {{ ['a','b'] | join(', ') }} {{ 'a-b' | replace('-', '+') }}"),
            "13 a, b a+b");
  EXPECT_EQ(render("{{ xs | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }} "
                   "{{ xs | rejectattr('role', 'equalto', 'user') | list | length }} {{ xs | map(attribute='c') | list }}",
                   {{"xs", {{{"role", "user"}, {"c", "1"}}, {{"role", "bot"}, {"c", "2"}}, {{"role", "user"}, {"c", "3"}}}}}),
            "13 1 [\"1\", \"2\", \"3\"]");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ [3,1,3] | unique | list }}|{{ [1,2] | reverse | list }}"),
            "a\n  b\n\n  c|[3, 1]|[2, 1]");
}

TEST(ChatInterpreter, StringAndMappingMethods) {
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'abc'.startswith('b') }}"),
            "truetruefalse");
  EXPECT_EQ(render("[{{ ' \na \n'.strip() }}][{{ '\n\na \n'.lstrip('\n') }}][{{ 'xxayx'.rstrip('x') }}]"),
            "[a][a \n][xxay]");
  EXPECT_EQ(render("{{ 'a</think>b</think>c'.split('</think>') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}"),
            "[\"a\", \"b\", \"c\"] [\"a\", \"b\"] [\"a\", \"b,c\"]");
  EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b', 2) }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}"),
            "bba Hello World Hello");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z', 'no') }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}",
                   {{"d", {{"a", 1}}}}),
            "1 no [\"a\"] [1] [[\"a\", 1]]");
}

TEST(ChatInterpreter, GenerationBlockRendersItsBody) {
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
  EXPECT_EQ(render("a {%- generation -%} b {%- endgeneration %}c"), "abc");
}

TEST(ChatInterpreter, StripBeforeATagStopsAtAComment) {
  // {%- strips the text right before it; a comment in between keeps it (as the reference).
  EXPECT_EQ(render("x \n{# c #}\n{%- if true %}y{% endif %}"), "x \ny");
  EXPECT_EQ(render("x \n{%- if true %}y{% endif %}"), "xy");
}

TEST(ChatInterpreter, MacrosAndGlobals) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} "
                   "{{ greet('b', punct='?') }}"),
            "hi a! hi b?");
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 7, 2) | list }}"), "[0, 1, 2] [1, 3, 5]");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M %B') }}"),
            "26 Jul 2024 2024-07-26 12:00 July");
  EXPECT_EQ(render("{{ bos_token }}|{{ eos_token }}"), "<s>|</s>");
}

TEST(ChatInterpreter, RaiseException) {
  try {
    render("a\n{% if true %}\n{{ raise_exception('Roles must alternate') }}{% endif %}");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised);
    EXPECT_EQ(e.line, 3);
    EXPECT_EQ(e.template_message, "Roles must alternate");
    EXPECT_EQ(std::string(e.what()), "chat template: raise_exception at line 3: Roles must alternate");
  }
}

TEST(ChatInterpreter, UnknownConstructsAreRefusedAtLoadWithTheirLine) {
  EXPECT_EQ(error_of("a\n\n{{ x | xyz }}"), "chat template: unsupported filter 'xyz' at line 3");
  EXPECT_EQ(error_of("{% if x is prime %}{% endif %}"), "chat template: unsupported test 'prime' at line 1");
  EXPECT_EQ(error_of("\n{{ 'a'.zfill(3) }}"), "chat template: unsupported method 'zfill' at line 2");
  EXPECT_EQ(error_of("{{ cycler(1) }}"), "chat template: unsupported function 'cycler' at line 1");
  EXPECT_EQ(error_of("x\n{% include 'other.j2' %}"), "chat template: unsupported statement '{% include %}' at line 2");
  EXPECT_EQ(error_of("{% if false %}{{ x | tojson(sort_keys=true) }}{% endif %}"),
            "chat template: unsupported argument 'sort_keys' of filter 'tojson' at line 1");
  EXPECT_EQ(error_of("{{ x | join(attribute='a') }}", {{"x", {1}}}),
            "chat template: unsupported argument 'attribute' of filter 'join' at line 1");
  // Refused at load: not even a render with the filter out of the path passes.
  EXPECT_THROW(ChatTemplate("{% if false %}{{ x | xyz }}{% endif %}", "", ""), TemplateError);
}

TEST(ChatInterpreter, MalformedTemplatesNameTheProblemAndLine) {
  EXPECT_EQ(error_of("{% if x %}\nno end"), "chat template: '{% if %}' opened at line 1 has no '{% endif %}' at line 2");
  EXPECT_EQ(error_of("{% for x in xs %}{% endif %}"), "chat template: unexpected '{% endif %}' at line 1");
  EXPECT_EQ(error_of("a\n{{ 1 + }}"), "chat template: expected an expression, found '}}' at line 2");
  EXPECT_EQ(error_of("{{ 'abc }}"), "chat template: unterminated string literal at line 1");
  EXPECT_EQ(error_of("\n\n{{ x"), "chat template: unclosed '{{' (no '}}') at line 3");
  EXPECT_EQ(error_of("{# never closed"), "chat template: unclosed comment '{#' at line 1");
  EXPECT_EQ(error_of("{{ a $ b }}"), "chat template: unexpected character '$' at line 1");
  EXPECT_EQ(error_of("{% break %}"), "chat template: '{% break %}' outside a loop at line 1");
}

TEST(ChatInterpreter, RunTimeErrorsNameTheLine) {
  EXPECT_EQ(error_of("\n{{ x + 1 }}"), "chat template: cannot apply '+' to undefined and an integer at line 2");
  EXPECT_EQ(error_of("{{ 5 | trim }}"), "chat template: filter 'trim' cannot take an integer at line 1");
  EXPECT_EQ(error_of("{% set x.a = 1 %}", {{"x", 1}}),
            "chat template: cannot set 'x.a': 'x' is not a namespace() at line 1");
  EXPECT_EQ(error_of("{{ 1 // 0 }}"), "chat template: division by zero at line 1");
  // Python's TypeError, not JavaScript's Array.toString() pasted into a prompt.
  EXPECT_EQ(error_of("{{ '[INST] ' + parts }}", {{"parts", {{{"type", "text"}}}}}),
            "chat template: cannot apply '+' to a string and a list at line 1");
}

TEST(ChatInterpreter, CraftedTemplatesAreBounded) {
  EXPECT_EQ(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
            "chat template: nesting deeper than 200 levels at line 1");
  std::string ifs;
  for (int k = 0; k < 300; ++k) ifs += "{% if true %}";
  EXPECT_EQ(error_of(ifs), "chat template: nesting deeper than 200 levels at line 1");
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "chat template: macro 'f' calls nested deeper than 64 at line 1");
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "chat template: a value nested deeper than 512 (one that holds itself?)");
  nlohmann::ordered_json deep = 1;
  for (int k = 0; k < 600; ++k) deep = nlohmann::ordered_json::array({deep});
  EXPECT_EQ(error_of("{{ x | length }}", {{"x", deep}}), "chat template: a JSON value nested deeper than 512");
  EXPECT_EQ(error_of("{{ range(10000000000) | length }}"), "chat template: range() of more than 1048576 items at line 1");
  EXPECT_EQ(error_of("{{ 'ab' * 100000000 }}"), "chat template: string repetition of more than 67108864 bytes at line 1");
}

TEST(ChatTemplateConfig, LoadsStringOrNamedTemplatesAndSpecialTokens) {
  const ChatTemplate a = ChatTemplate::from_tokenizer_config(
      R"({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
          "bos_token": {"content": "<B>"}, "eos_token": "<E>"})");
  EXPECT_EQ(a.bos_token(), "<B>");
  EXPECT_EQ(a.eos_token(), "<E>");
  EXPECT_EQ(a.render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])")), "<B>hi");
  const ChatTemplate b = ChatTemplate::from_tokenizer_config(
      R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(b.render(nlohmann::ordered_json::array()), "D");
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(R"({"bos_token": "x"})"), TemplateError);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config("not json"), TemplateError);
}

TEST(ChatTemplateConfig, FlattensTextParts) {
  const nlohmann::ordered_json m = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
          {"role": "assistant", "content": "c"}])");
  const nlohmann::ordered_json f = flatten_text_parts(m);
  EXPECT_EQ(f[0]["content"], "a\nb");
  EXPECT_EQ(f[1]["content"], "c");
  EXPECT_THROW(flatten_text_parts(nlohmann::ordered_json::parse(R"([{"role": "user", "content": [{"type": "image"}]}])")),
               TemplateError);
}

}  // namespace interpreter_test
}  // namespace mt::chat
