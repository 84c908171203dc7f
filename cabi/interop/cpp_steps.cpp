// C++ steps of the FutoIn C++ reference implementation (core-cpp-api,
// core-cpp-ri-asyncsteps) driving a root through the binary interface:
// our root (futoin_asyncsteps_new) or, for comparison, the RI's own.
// Built and run by scripts/cpp-interop.sh, one process per case:
//
//	cpp_steps list           the case names
//	cpp_steps ours|ri NAME   run one case; prints PASS or FAIL and why
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <futoin/ri/asyncsteps.hpp>
#include <futoin/ri/asynctool.hpp>
#include <futoin/ri/binaryapi.hpp>
#include <futoin/ri/mutex.hpp>

extern "C" FutoInAsyncSteps* futoin_asyncsteps_new(void);
extern "C" void futoin_asyncsteps_free_wait(FutoInAsyncSteps* bsi);

using namespace futoin;

namespace {

// Trace collects what the steps did, from any thread.
struct Trace
{
    std::mutex mu;
    std::vector<std::string> lines;

    void operator()(const std::string& s)
    {
        std::lock_guard<std::mutex> lock(mu);
        lines.push_back(s);
    }
    std::string str()
    {
        std::lock_guard<std::mutex> lock(mu);
        std::string out;
        for (auto& l : lines) {
            out += l + "|";
        }
        return out;
    }
};

struct Case
{
    const char* name;
    std::function<void(IAsyncSteps& root, Trace& log)> setup;
    const char* want; // the trace, lines joined by '|'
};

using Step = IAsyncSteps;

const std::vector<Case>& cases()
{
    static const std::vector<Case> all{
            {"success_args",
             [](Step& as, Trace& log) {
                 as.add([](Step& as) { as.success(2, 1.5, "str", true); });
                 as.add([&log](Step& as, int a, double b, futoin::string&& c, bool d) {
                     std::ostringstream o;
                     o << a << " " << b << " " << c.c_str() << " " << d;
                     log(o.str());
                     as.success(std::vector<int>{3, 4, 5});
                 });
                 as.add([&log](Step&, std::vector<int>&& v) {
                     log("vector " + std::to_string(v.size()) + " " + std::to_string(v[2]));
                 });
             },
             "2 1.5 str 1|vector 3 5|"},
            {"nested_order",
             [](Step& as, Trace& log) {
                 as.add([&log](Step& as) {
                     log("outer");
                     as.add([&log](Step&) { log("inner1"); });
                     as.add([&log](Step& as) {
                         log("inner2");
                         as.success(futoin::string("up"));
                     });
                 });
                 as.add([&log](Step&, futoin::string&& s) { log(std::string("next ") + s.c_str()); });
             },
             "outer|inner1|inner2|next up|"},
            {"error_info",
             [](Step& as, Trace& log) {
                 as.add(
                         [](Step& as) {
                             as.add([](Step& as) { as.error("MyError", "my info"); });
                         },
                         [&log](Step& as, ErrorCode code) {
                             log(std::string("eh ") + RawErrorCode(code) + " " + as.state().error_info.c_str());
                             as.success(futoin::string("recovered"));
                         });
                 as.add([&log](Step&, futoin::string&& s) { log(std::string(s.c_str())); });
             },
             "eh MyError my info|recovered|"},
            {"error_replaced",
             [](Step& as, Trace& log) {
                 as.add([](Step& as) { as.error("First"); },
                        [&log](Step& as, ErrorCode code) {
                            log(std::string("eh ") + RawErrorCode(code));
                            as.error("Second");
                        });
             },
             "eh First|unhandled Second|"},
            {"state",
             [](Step& as, Trace& log) {
                 as.add([](Step& as) {
                     as.state()["counter"] = 40;
                     as.state()["error_info"] = 1; // an ordinary name with allocate
                 });
                 as.add([&log](Step& as) {
                     int& c = as.state<int>("counter");
                     c += 2;
                     log("counter " + std::to_string(as.state<int>("counter")) + " "
                         + std::to_string(as.state<int>("error_info")));
                 });
             },
             "counter 42 1|"},
            {"stack",
             [](Step& as, Trace& log) {
                 struct Obj
                 {
                     Trace* log;
                     ~Obj() { (*log)("destroyed"); }
                 };
                 as.add([&log](Step& as) {
                     as.stack<Obj>().log = &log;
                     log("allocated");
                 });
                 as.add([&log](Step&) { log("next"); });
             },
             "allocated|destroyed|next|"},
            {"repeat_break",
             [](Step& as, Trace& log) {
                 as.repeat(5, [&log](Step& as, size_t i) {
                     log("i " + std::to_string(i));
                     if (i == 2) {
                         as.breakLoop();
                     }
                 });
                 as.add([&log](Step&) { log("after"); });
             },
             "i 0|i 1|i 2|after|"},
            {"labels",
             [](Step& as, Trace& log) {
                 as.add([&log](Step& as) {
                     auto n = std::make_shared<int>(0);
                     as.loop(
                             [&log, n](Step& as) {
                                 ++*n;
                                 log("outer " + std::to_string(*n));
                                 as.repeat(
                                         3,
                                         [&log, n](Step& as, size_t j) {
                                             log("inner " + std::to_string(j));
                                             if (j == 1 && *n == 1) {
                                                 as.continueLoop("outer");
                                             }
                                             if (j == 1) {
                                                 as.breakLoop("outer");
                                             }
                                         },
                                         "inner");
                             },
                             "outer");
                 });
                 as.add([&log](Step&) { log("after"); });
             },
             "outer 1|inner 0|inner 1|outer 2|inner 0|inner 1|after|"},
            {"parallel",
             [](Step& as, Trace& log) {
                 as.add([&log](Step& as) {
                     auto& p = as.parallel();
                     for (int i = 0; i < 3; ++i) {
                         p.add([&log, i](Step& as) {
                             as.add([&log, i](Step&) { log("branch " + std::to_string(i)); });
                         });
                     }
                 });
                 as.add([&log](Step&) { log("after"); });
             },
             "branch 0|branch 1|branch 2|after|"},
            {"parallel_error",
             [](Step& as, Trace& log) {
                 as.add([](Step& as) {
                     auto& p = as.parallel([&](Step& as, ErrorCode code) {
                         (void)as;
                         (void)code;
                     });
                     p.add([](Step& as) { as.error("Branch"); });
                     p.add([](Step& as) { as.waitExternal(); });
                 },
                        [&log](Step& as, ErrorCode code) {
                            log(std::string("eh ") + RawErrorCode(code));
                            as.success();
                        });
             },
             "eh Branch|"},
            {"timeout",
             [](Step& as, Trace& log) {
                 as.add(
                         [&log](Step& as) {
                             as.setCancel([&log](Step&) { log("cancel"); });
                             as.setTimeout(std::chrono::milliseconds{20});
                         },
                         [&log](Step& as, ErrorCode code) {
                             log(std::string("eh ") + RawErrorCode(code));
                             as.success();
                         });
             },
             "cancel|eh Timeout|"},
            {"other_thread",
             [](Step& as, Trace& log) {
                 as.add([](Step& as) {
                     as.waitExternal();
                     std::thread([&as]() {
                         std::this_thread::sleep_for(std::chrono::milliseconds{5});
                         as.success(7);
                     }).detach();
                 });
                 as.add([&log](Step&, int v) { log("got " + std::to_string(v)); });
             },
             "got 7|"},
            {"await_future",
             [](Step& as, Trace& log) {
                 as.add([](Step& as) {
                     as.await(std::async(std::launch::async, []() { return 5; }));
                 });
                 as.add([&log](Step&, int v) { log("awaited " + std::to_string(v)); });
             },
             "awaited 5|"},
            {"mutex",
             [](Step& as, Trace& log) {
                 static ri::Mutex mtx;
                 as.add([&log](Step& as) {
                     auto& p = as.parallel();
                     for (int i = 0; i < 2; ++i) {
                         p.sync(mtx, [&log, i](Step& as) {
                             log("enter " + std::to_string(i));
                             as.add([&log, i](Step&) { log("leave " + std::to_string(i)); });
                         });
                     }
                 });
             },
             "enter 0|leave 0|enter 1|leave 1|"},
            {"mutex_two_roots",
             [](Step& as, Trace& log) {
                 // Two roots (separate states) on one Mutex: B waits for A.
                 static ri::Mutex mtx;
                 // Never destroyed: B's flow may still run when the case
                 // ends, and a free among the static destructors at exit
                 // would race the loop that runs its cleanups.
                 static IAsyncSteps* other = nullptr;
                 as.add([&log](Step& as) {
                     other = as.newInstance().release();
                     other->sync(mtx, [&log](Step& as) {
                         log("enter B");
                         as.add([&log](Step&) { log("leave B"); });
                     });
                     as.sync(mtx, [&log](Step& as) {
                         log("enter A");
                         other->execute();
                         as.waitExternal();
                         std::thread([&as, &log]() {
                             std::this_thread::sleep_for(std::chrono::milliseconds{20});
                             log("leave A");
                             as.success();
                         }).detach();
                     });
                 });
             },
             "enter A|leave A|enter B|leave B|"},
            {"new_instance",
             [](Step& as, Trace& log) {
                 as.add([&log](Step& as) {
                     auto inner = std::shared_ptr<IAsyncSteps>(as.newInstance().release());
                     log(std::string("inner valid ") + (*inner ? "1" : "0"));
                     as.waitExternal();
                     inner->add([&log, &as, inner](Step&) {
                         log("inner ran");
                         as.success();
                     });
                     inner->execute();
                     as.stack<std::shared_ptr<IAsyncSteps>>(inner);
                 });
             },
             "inner valid 1|inner ran|"},
            {"root_not_valid_while_running",
             [](Step& as, Trace& log) {
                 as.add([&log, &as](Step& step) {
                     log(std::string("root ") + (as ? "1" : "0") + " step " + (step ? "1" : "0"));
                 });
             },
             "root 0 step 1|"},
    };
    return all;
}

// Root is a root to run a case on, wrapped as the C++ API.
struct Root
{
    explicit Root(bool ours)
    {
        if (ours) {
            ours_ = futoin_asyncsteps_new();
            wrapped_ = ri::wrap_binary_steps(*ours_);
        } else {
            ri_.reset(new ri::AsyncSteps(at_));
            wrapped_ = ri_->wrap(ri_->binary());
        }
    }
    ~Root()
    {
        wrapped_.reset();
        if (ours_ != nullptr) {
            // Returns once the loop has run the cleanups, as the RI's
            // destructor does: the RI's objects they use go next.
            futoin_asyncsteps_free_wait(ours_);
        }
    }
    IAsyncSteps& steps() { return *wrapped_; }

    ri::AsyncTool at_;
    std::unique_ptr<ri::AsyncSteps> ri_;
    FutoInAsyncSteps* ours_{nullptr};
    std::unique_ptr<IAsyncSteps> wrapped_;
};

int run(bool ours, const Case& c)
{
    Trace log;
    std::promise<void> done;
    std::atomic_bool ended{false};
    auto end = [&]() {
        if (!ended.exchange(true)) {
            done.set_value();
        }
    };
    {
        Root root(ours);
        auto& as = root.steps();
        c.setup(as, log);
        as.add([&](Step&) { end(); });
        as.state().unhandled_error = [&](ErrorCode code) {
            log(std::string("unhandled ") + RawErrorCode(code));
            end();
        };
        as.execute();
        if (done.get_future().wait_for(std::chrono::seconds{5}) != std::future_status::ready) {
            std::printf("FAIL %s: no end after 5 s; trace %s\n", c.name, log.str().c_str());
            std::fflush(stdout);
            std::_Exit(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{20}); // late lines
    }
    std::string got = log.str();
    if (got != c.want) {
        std::printf("FAIL %s: trace %s want %s\n", c.name, got.c_str(), c.want);
        return 1;
    }
    std::printf("PASS %s\n", c.name);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc == 2 && std::strcmp(argv[1], "list") == 0) {
        for (auto& c : cases()) {
            std::printf("%s\n", c.name);
        }
        return 0;
    }
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s list | ours|ri NAME\n", argv[0]);
        return 2;
    }
    for (auto& c : cases()) {
        if (std::strcmp(c.name, argv[2]) == 0) {
            return run(std::strcmp(argv[1], "ours") == 0, c);
        }
    }
    std::fprintf(stderr, "no case %s\n", argv[2]);
    return 2;
}
