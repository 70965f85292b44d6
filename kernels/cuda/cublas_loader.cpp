// cuBLAS through dlopen: see cublas_loader.hpp.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace tandem::cuda_device::cublas_dl {

namespace {

#define TANDEM_STR2(x) #x
#define TANDEM_STR(x) TANDEM_STR2(x)
constexpr const char* kLibrary = "libcublas.so." TANDEM_STR(CUBLAS_VER_MAJOR);

struct Library {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) setStream = nullptr;
    decltype(&cublasGetStatusString) statusString = nullptr;
    decltype(&cublasSgemm_v2) sgemm = nullptr;
    decltype(&cublasSgemmStridedBatched) sgemmStridedBatched = nullptr;
    std::string error;

    Library() {
        void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
#ifdef TANDEM_CUBLAS_DIR
        // The toolkit this was built with, for machines whose loader path lacks it.
        if (!handle)
            handle = dlopen(TANDEM_CUBLAS_DIR
                            "/"
                            "libcublas.so." TANDEM_STR(CUBLAS_VER_MAJOR),
                            RTLD_NOW | RTLD_LOCAL);
#endif
        if (!handle) {
            const char* why = dlerror();
            error = std::string("cuBLAS could not be loaded (") + kLibrary +
                    "; install the CUDA libraries or the NVIDIA cuBLAS package): " +
                    (why ? why : "unknown reason");
            return;
        }
        auto sym = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
            if (!fn && error.empty())
                error = std::string(kLibrary) + " lacks " + name;
        };
        sym(create, "cublasCreate_v2");
        sym(destroy, "cublasDestroy_v2");
        sym(setStream, "cublasSetStream_v2");
        sym(statusString, "cublasGetStatusString");
        sym(sgemm, "cublasSgemm_v2");
        sym(sgemmStridedBatched, "cublasSgemmStridedBatched");
        // The library stays loaded for the life of the process.
    }
};

const Library& library() {
    static const Library instance;
    return instance;
}

}  // namespace

const std::string& loadError() {
    return library().error;
}

cublasStatus_t create(cublasHandle_t* handle) {
    if (!loadError().empty())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return library().create(handle);
}
cublasStatus_t destroy(cublasHandle_t handle) {
    if (!loadError().empty())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return library().destroy(handle);
}
cublasStatus_t setStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!loadError().empty())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return library().setStream(handle, stream);
}
const char* statusString(cublasStatus_t status) {
    if (!loadError().empty())
        return loadError().c_str();
    return library().statusString(status);
}
cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                     int m, int n, int k, const float* alpha, const float* A, int lda,
                     const float* B, int ldb, const float* beta, float* C, int ldc) {
    if (!loadError().empty())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return library().sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t sgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k,
                                   const float* alpha, const float* A, int lda, long long strideA,
                                   const float* B, int ldb, long long strideB, const float* beta,
                                   float* C, int ldc, long long strideC, int batchCount) {
    if (!loadError().empty())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return library().sgemmStridedBatched(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B,
                                         ldb, strideB, beta, C, ldc, strideC, batchCount);
}

}  // namespace tandem::cuda_device::cublas_dl
