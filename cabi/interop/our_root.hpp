// interop::Root: a root of our library (futoin_asyncsteps_new) in place of
// the C++ reference implementation's ri::AsyncSteps, for the RI's own
// binarysteps test. scripts/cpp-interop.sh copies that test to a temporary
// directory, replaces ri::AsyncSteps with interop::Root there, and
// compiles it with -include of this header. The AsyncTool the test gives
// is not used: our root runs on the library's default loop.
#ifndef INTEROP_OUR_ROOT_HPP
#define INTEROP_OUR_ROOT_HPP

#include <memory>

#include <futoin/iasyncsteps.hpp>
#include <futoin/ri/binaryapi.hpp>

extern "C" FutoInAsyncSteps* futoin_asyncsteps_new(void);
extern "C" void futoin_asyncsteps_free_wait(FutoInAsyncSteps* bsi);

namespace interop {
    class Root
    {
    public:
        explicit Root(futoin::IAsyncTool& /*unused*/) :
            p_(futoin_asyncsteps_new()), w_(futoin::ri::wrap_binary_steps(*p_))
        {}
        Root(const Root&) = delete;
        Root& operator=(const Root&) = delete;
        ~Root()
        {
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
