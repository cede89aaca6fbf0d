// libFuzzer target for the dashboard's HTTP surface: raw bytes through the real request parser
// (Beast, with the server's limits) and the real sign-in rules and routes (server/http), against
// an in-memory store seeded with an experiment, runs, metrics and logs.
//
// Input: the bytes of one or more pipelined HTTP/1.1 requests. Before parsing, "$C" becomes a
// valid session cookie value, "$X" the CSRF token, "$T" the sign-in token and "$P" the port the
// server listens on, so that the fuzzer reaches signed-in routes as easily as refused ones.
// Properties: nothing escapes as an exception; every request parsed gets exactly one answer, a
// well-formed HTTP/1.1 response with a status in 200..599 whose header lines are all
// "Name: value" from the set the server sends (no header a client could inject); a request that
// carries neither the session nor the sign-in token is never answered 2xx.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "server/controller/controller.h"
#include "server/http/api.h"
#include "server/http/auth.h"
#include "server/http/server.h"
#include "server/lifecycle/lifecycle.h"
#include "server/query/query.h"
#include "server/store/store.h"
#include "spdlog/spdlog.h"

namespace {

constexpr int kPort = 8750;
constexpr char kToken[] = "fuzz-sign-in-token";

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_http: property violated: %s\n%s\n", what, detail.c_str());
  std::abort();
}

struct World {
  boost::asio::io_context core;
  std::unique_ptr<tae::store::Store> store;
  std::unique_ptr<tae::query::Query> query;
  std::unique_ptr<tae::controller::Controller> controller;
  std::unique_ptr<tae::http::Api> api;
  tae::http::SessionTable sessions;
  tae::http::Secrets session;  // a signed-in session ("$C", "$X")

  World() {
    spdlog::set_level(spdlog::level::off);
    store = std::move(tae::store::Store::Open(":memory:").value());
    tae::model::NewExperiment exp;
    exp.name = "fuzz";
    exp.spec_hash = "fuzz";
    exp.spec_text = "name = \"fuzz\"";
    exp.report.metrics = {"train/loss"};
    for (int seed = 0; seed < 2; ++seed) {
      exp.runs.push_back({"baseline", seed, "{}", {}});
      exp.runs.push_back({"no-attention", seed, "{}", {}});
    }
    (void)store->CreateExperiment(exp, 1.0).value();
    std::vector<tae::model::IngestEvent> events;
    uint64_t seq = 0;
    for (int64_t run = 1; run <= 4; ++run) {
      for (int64_t step = 1; step <= 20; ++step) {
        tae::model::IngestEvent e;
        e.kind = tae::model::IngestEvent::Kind::kMetrics;
        e.seq = ++seq;
        e.run_id = run;
        e.attempt = 1;
        e.step = step;
        e.values = {{"train/loss", 2.0 / static_cast<double>(step) + run}, {"eval/acc", 0.5}};
        events.push_back(e);
        tae::model::IngestEvent line;
        line.kind = tae::model::IngestEvent::Kind::kLog;
        line.seq = ++seq;
        line.run_id = run;
        line.attempt = 1;
        line.stream = step % 3 == 0 ? "stderr" : "stdout";
        line.text = "line " + std::to_string(step) + " \xff\xfe invalid utf-8 on purpose";
        events.push_back(line);
      }
    }
    (void)store->Ingest("fuzz-agent", events, tae::lifecycle::IngestRules()).value();
    query = std::make_unique<tae::query::Query>(store.get());
    controller = std::make_unique<tae::controller::Controller>(&core, store.get(),
                                                               tae::controller::Options{});
    api = std::make_unique<tae::http::Api>(&core, controller.get(), query.get());
    session = sessions.Mint(1e12).value();  // valid whatever the clock says
  }
};

World& TheWorld() {
  static World* world = new World();  // lives for the process
  return *world;
}

void Replace(std::string* text, std::string_view from, const std::string& to) {
  for (size_t at = 0; (at = text->find(from, at)) != std::string::npos; at += to.size()) {
    text->replace(at, from.size(), to);
  }
}

void CheckAnswer(const std::string& answer, bool credentialed) {
  constexpr std::string_view kStart = "HTTP/1.1 ";
  if (answer.compare(0, kStart.size(), kStart) != 0 || answer.size() < kStart.size() + 3) {
    Fail("an answer is not an HTTP/1.1 response", answer.substr(0, 200));
  }
  const int status = std::atoi(answer.substr(kStart.size(), 3).c_str());
  if (status < 200 || status > 599) {
    Fail("a status outside 200..599", answer.substr(0, 200));
  }
  if (!credentialed && status < 300) {
    Fail("a request without the session or the token was answered 2xx", answer.substr(0, 300));
  }
  static const std::set<std::string> kHeaders = {"Content-Type",
                                                 "Server",
                                                 "X-Content-Type-Options",
                                                 "X-Frame-Options",
                                                 "Referrer-Policy",
                                                 "Cache-Control",
                                                 "Content-Length",
                                                 "Connection",
                                                 "Set-Cookie",
                                                 "Content-Disposition",
                                                 "Content-Security-Policy",
                                                 "Keep-Alive",
                                                 "Transfer-Encoding"};
  const size_t end = answer.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (answer.find("(event stream)") != std::string::npos) {
      return;
    }
    Fail("an answer without the end of its header", answer.substr(0, 300));
  }
  size_t at = answer.find("\r\n") + 2;
  while (at < end) {
    const size_t eol = answer.find("\r\n", at);
    const std::string line = answer.substr(at, eol - at);
    const size_t colon = line.find(": ");
    if (colon == std::string::npos || kHeaders.count(line.substr(0, colon)) == 0) {
      Fail("a header line the server does not send", line.substr(0, 200));
    }
    at = eol + 2;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  std::string input(reinterpret_cast<const char*>(data), size);
  const bool credentialed = input.find("$C") != std::string::npos ||
                            input.find("$T") != std::string::npos ||
                            input.find(world.session.session) != std::string::npos;
  Replace(&input, "$C", world.session.session);
  Replace(&input, "$X", world.session.csrf);
  Replace(&input, "$T", kToken);
  Replace(&input, "$P", std::to_string(kPort));
  tae::http::ServerOptions options;
  options.token = kToken;
  options.handler = world.api.get();
  std::vector<std::string> answers;
  int parsed = 0;
  try {
    parsed = tae::http::ServeBytesForTest(input, options, kPort, &world.sessions,
                                          [&](std::string answer) { answers.push_back(answer); });
    world.core.restart();
    world.core.poll();
  } catch (const std::exception& e) {
    Fail("an exception escaped", e.what());
  }
  // A refused or failed parse may answer once more than it parsed (413, 431).
  if (static_cast<int>(answers.size()) < parsed ||
      answers.size() > static_cast<size_t>(parsed) + 1) {
    Fail("not one answer per request",
         std::to_string(parsed) + " parsed, " + std::to_string(answers.size()) + " answers");
  }
  for (const std::string& answer : answers) {
    CheckAnswer(answer, credentialed);
  }
  return 0;
}
