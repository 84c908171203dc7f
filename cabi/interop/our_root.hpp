// interop::Root: a root of our library (futoin_asyncsteps_new) in place of
// the C++ reference implementation's ri::AsyncSteps, for the RI's own
// binarysteps test. scripts/cpp-interop.sh copies that test to a temporary
// directory, replaces ri::AsyncSteps with interop::Root there, and
// compiles it with -include of this header. The AsyncTool the test gives
// is not used: our root runs on the library's default loop.
//
// The script also puts interop::settle() after each wait for the tests'
// "done" promise: see settle.
#ifndef INTEROP_OUR_ROOT_HPP
#define INTEROP_OUR_ROOT_HPP

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <futoin/iasyncsteps.hpp>
#include <futoin/ri/binaryapi.hpp>

extern "C" FutoInAsyncSteps* futoin_asyncsteps_new(void);
extern "C" void futoin_asyncsteps_free_wait(FutoInAsyncSteps* bsi);

namespace interop {
    // The roots alive, for settle.
    struct Roots
    {
        std::mutex mu;
        std::set<FutoInAsyncSteps*> set;

        static Roots& get()
        {
            static Roots roots;
            return roots;
        }
    };

    // settle waits, for up to 10 s, until no root of ours runs. The tests
    // set their "done" promise in the last step of a flow and then read the
    // flow's state from their own thread. The RI's root allows that; ours
    // still runs until that step's callback has returned, and its
    // stateVariable gives another thread NULL then, which the RI's wrapper
    // dereferences. Waiting here is what the C interface asks of a caller.
    inline void settle()
    {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
        for (;;) {
            bool idle = true;
            {
                std::lock_guard<std::mutex> lock(Roots::get().mu);
                for (auto* p : Roots::get().set) {
                    idle = idle && p->api->isValid(p) != 0;
                }
            }
            if (idle || std::chrono::steady_clock::now() > deadline) {
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds{1});
        }
    }

    class Root
    {
    public:
        explicit Root(futoin::IAsyncTool& /*unused*/) :
            p_(futoin_asyncsteps_new()), w_(futoin::ri::wrap_binary_steps(*p_))
        {
            std::lock_guard<std::mutex> lock(Roots::get().mu);
            Roots::get().set.insert(p_);
        }
        Root(const Root&) = delete;
        Root& operator=(const Root&) = delete;
        ~Root()
        {
            {
                std::lock_guard<std::mutex> lock(Roots::get().mu);
                Roots::get().set.erase(p_);
            }
            w_.reset();
            // As the RI's destructor: the cleanups have run when it returns,
            // so the test may destroy what they use, or exit.
            futoin_asyncsteps_free_wait(p_);
        }

        FutoInAsyncSteps& binary() noexcept { return *p_; }

        std::unique_ptr<futoin::IAsyncSteps> wrap(FutoInAsyncSteps& b)
        {
            return futoin::ri::wrap_binary_steps(b);
        }

        // The state of a wrapper: the RI's own root has features of its
        // own there (catch_trace) that no binary table carries.
        futoin::asyncsteps::BaseState& state() noexcept { return w_->state(); }

        explicit operator bool() const noexcept { return p_->api->isValid(p_) != 0; }
        bool operator!() const noexcept { return !bool(*this); }

    private:
        FutoInAsyncSteps* p_;
        std::unique_ptr<futoin::IAsyncSteps> w_;
    };
} // namespace interop

#endif
