#include "main/config_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace herd {
namespace {

// A command shaped like herd master / herd agent: a value, a list, a
// switch, and --config.
struct Command {
  CLI::App app{"herd"};
  CLI::App* agent = nullptr;
  std::string listen = "127.0.0.1:7071";
  std::string interval = "2s";
  std::vector<std::string> attrs;
  bool stop = false;
  Command() {
    agent = app.add_subcommand("agent");
    agent->add_option("--listen", listen);
    agent->add_option("--poll-interval", interval);
    agent->add_option("--attr", attrs);
    agent->add_flag("--stop-tasks-on-exit", stop);
    AddConfigFlag(agent);
  }
  // Parses `args` as main() does; the error's message, or "ok".
  std::string Run(std::vector<std::string> args) {
    absl::StatusOr<std::vector<std::string>> expanded = ExpandConfig(app, std::move(args));
    if (!expanded.ok()) return std::string(expanded.status().message());
    std::reverse(expanded->begin(), expanded->end());
    try {
      app.parse(*expanded);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "ok";
  }
};

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFile, EveryKeyIsAFlagAndTheCommandLineWins) {
  const std::string path = Write("agent.yaml",
                                 "# an agent\n"
                                 "listen: 0.0.0.0:7071\n"
                                 "poll-interval: 5s\n"
                                 "attr: [rack=r1, zone=a]\n"
                                 "stop-tasks-on-exit: true\n");
  Command c;
  EXPECT_EQ(c.Run({"agent", "--config", path, "--poll-interval=9s"}), "ok");
  EXPECT_EQ(c.listen, "0.0.0.0:7071");
  EXPECT_EQ(c.interval, "9s");  // the flag, not the file
  EXPECT_EQ(c.attrs, (std::vector<std::string>{"rack=r1", "zone=a"}));
  EXPECT_TRUE(c.stop);

  Command d;
  EXPECT_EQ(d.Run({"agent", "--attr", "rack=r9", "--config=" + path}), "ok");
  EXPECT_EQ(d.attrs, (std::vector<std::string>{"rack=r9"}));  // a list on the command line replaces the file's
  EXPECT_EQ(d.interval, "5s");

  Command off;
  EXPECT_EQ(off.Run({"agent", "--config", Write("off.yaml", "stop-tasks-on-exit: false\n")}), "ok");
  EXPECT_FALSE(off.stop);
  Command none;  // without --config nothing is read
  EXPECT_EQ(none.Run({"agent"}), "ok");
  EXPECT_EQ(none.listen, "127.0.0.1:7071");
}

TEST(ConfigFile, ErrorsNameFileLineAndKey) {
  auto error = [](const std::string& text) {
    Command c;
    return c.Run({"agent", "--config", Write("bad.yaml", text)});
  };
  const std::string file = (std::filesystem::path(::testing::TempDir()) / "bad.yaml").string();
  EXPECT_EQ(error("listen: a:1\nlisen: b:2\n"),
            file + ":2: lisen: not a flag of herd agent (keys are its flags without --; see herd agent --help)");
  EXPECT_EQ(error("poll-interval: [1s, 2s]\n"), file + ":1: poll-interval: takes one value, not a list");
  EXPECT_EQ(error("attr: {rack: r1}\n"), file + ":1: attr: expected a value or a list of values");
  EXPECT_EQ(error("stop-tasks-on-exit: maybe\n"), file + ":1: stop-tasks-on-exit: expected true or false");
  EXPECT_EQ(error("config: other.yaml\n").rfind(file + ":1: config: not a flag", 0), 0u);
  EXPECT_EQ(error("listen: [a\n").rfind(file + ":2: ", 0), 0u);
  EXPECT_EQ(error("- listen\n"), file + ":1: expected a map of flag: value (herd agent's flags, without --)");
  Command c;
  EXPECT_EQ(c.Run({"agent", "--config", "/nonexistent/agent.yaml"}).rfind("--config /nonexistent/agent.yaml: ", 0), 0u);
  Command twice;
  EXPECT_EQ(twice.Run({"agent", "--config", file, "--config", file}), "--config is given more than once");
}

}  // namespace
}  // namespace herd
