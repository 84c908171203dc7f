// Go steps (package cabi's Wrap) inside a flow of the FutoIn C++ reference
// implementation: a C++ step succeeds with ("from c++", 42), then the Go
// steps of one case of libinterop_go (./golib) run on the RI's root.
// Built and run by scripts/cpp-interop.sh, one process per case:
//
//	go_in_cpp list     the case names
//	go_in_cpp NAME     run one case; prints PASS or FAIL and why
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include <futoin/ri/asyncsteps.hpp>
#include <futoin/ri/asynctool.hpp>

extern "C" {
int interop_go_cases(void);
char* interop_go_case_name(int i);
void interop_go_add(int i, FutoInAsyncSteps* bsi);
void interop_go_unhandled(int i, const char* code);
char* interop_go_check(int i);
}

using namespace futoin;

namespace {

int find(const char* name)
{
    for (int i = 0; i < interop_go_cases(); ++i) {
        char* n = interop_go_case_name(i);
        bool same = std::strcmp(n, name) == 0;
        std::free(n);
        if (same) {
            return i;
        }
    }
    return -1;
}

int run(int i, const char* name)
{
    std::promise<void> done;
    std::atomic_bool ended{false};
    auto end = [&]() {
        if (!ended.exchange(true)) {
            done.set_value();
        }
    };
    {
        ri::AsyncTool at;
        ri::AsyncSteps root(at);
        root.add([](IAsyncSteps& as) { as.success(futoin::string("from c++"), 42); });
        interop_go_add(i, &root.binary());
        root.add([&](IAsyncSteps&) { end(); });
        root.state().unhandled_error = [&, i](ErrorCode code) {
            interop_go_unhandled(i, code);
            end();
        };
        root.execute();
        if (done.get_future().wait_for(std::chrono::seconds{5}) != std::future_status::ready) {
            char* why = interop_go_check(i);
            std::printf("FAIL %s: no end after 5 s; %s\n", name, why ? why : "");
            std::fflush(stdout);
            std::_Exit(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{20}); // late lines
    }
    char* why = interop_go_check(i);
    if (why != nullptr) {
        std::printf("FAIL %s: %s\n", name, why);
        std::free(why);
        return 1;
    }
    std::printf("PASS %s\n", name);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc == 2 && std::strcmp(argv[1], "list") == 0) {
        for (int i = 0; i < interop_go_cases(); ++i) {
            char* n = interop_go_case_name(i);
            std::printf("%s\n", n);
            std::free(n);
        }
        return 0;
    }
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s list | NAME\n", argv[0]);
        return 2;
    }
    int i = find(argv[1]);
    if (i < 0) {
        std::fprintf(stderr, "no case %s\n", argv[1]);
        return 2;
    }
    return run(i, argv[1]);
}
