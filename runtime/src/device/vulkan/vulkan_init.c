// Bringing the instance and the device up and down, and the state every file of the back end
// shares. Initialization (under tally_vk_lock, by vulkan_device.c on first use) opens the loader
// once per process, checks it offers Vulkan 1.1, creates the instance (with a debug messenger
// when TALLY_VULKAN_DEBUG asks), picks the physical device (TALLY_VULKAN_DEVICE, else the first
// with a compute queue and Vulkan 1.1), creates the logical device with one compute queue and
// the optional shader features the device offers, and a command pool. A failure destroys what
// was created and leaves its reason for the caller to report. Nothing here waits for the device.

#include "core/env.h"
#include "core/error.h"
#include "device/vulkan/vulkan_internal.h"
#include "tally_runtime.h"

#if TALLY_HAVE_VULKAN_HEADERS

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t tally_vk_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int32_t tally_vk_ready = 0;
tally_vk_state tally_vk;

const char *tally_vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS:
        return "VK_SUCCESS";
    case VK_NOT_READY:
        return "VK_NOT_READY";
    case VK_TIMEOUT:
        return "VK_TIMEOUT";
    case VK_INCOMPLETE:
        return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
        return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
        return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
        return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
        return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
        return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
        return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
        return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL:
        return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
        return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV:
        return "VK_ERROR_INVALID_SHADER_NV";
    default:
        return "VkResult";
    }
}

int32_t tally_vk_fail(void *user_context, int32_t code, const char *routine, const char *what,
                      VkResult r) {
    return tally_report_error(user_context, code, "%s: %s failed: %s (%d)", routine, what,
                              tally_vk_result_name(r), (int)r);
}

// dlsym returns an object pointer; POSIX guarantees it converts to a function pointer.
static PFN_vkVoidFunction to_function(void *p) {
    PFN_vkVoidFunction f;
    memcpy(&f, &p, sizeof(f));
    return f;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user_data) {
    (void)user_data;
    const char *level = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)     ? "error"
                        : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) ? "warning"
                        : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT)    ? "info"
                                                                                       : "verbose";
    // The loader reports through the same messenger (e.g. that VK_INSTANCE_LAYERS added a layer);
    // its messages are labelled apart from the layers' validation messages.
    int loader =
        data && data->pMessageIdName && strcmp(data->pMessageIdName, "Loader Message") == 0;
    const char *kind = loader                                                      ? "loader"
                       : (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT)  ? "validation"
                       : (types & VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT) ? "performance"
                                                                                   : "general";
    char msg[4096];
    snprintf(msg, sizeof(msg), "Vulkan %s %s: %s\n", kind, level,
             data && data->pMessage ? data->pMessage : "(no message)");
    tally_print_diagnostic(NULL, msg);
    return VK_FALSE;
}

static void fill_messenger_info(VkDebugUtilsMessengerCreateInfoEXT *info, int32_t level) {
    memset(info, 0, sizeof(*info));
    info->sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    info->messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    if (level >= 2) {
        info->messageSeverity |= VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_SEVERITY_VERBOSE_BIT_EXT;
    }
    info->messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    info->pfnUserCallback = debug_callback;
}

// ---- initialization and teardown (tally_vk_lock held)
// ----------------------------------------------

void tally_vk_destroy_core_locked(void) {
    if (tally_vk.command_pool && tally_vk.f.vkDestroyCommandPool) {
        tally_vk.f.vkDestroyCommandPool(tally_vk.device, tally_vk.command_pool, NULL);
    }
    if (tally_vk.device && tally_vk.f.vkDestroyDevice) {
        tally_vk.f.vkDestroyDevice(tally_vk.device, NULL);
    }
    if (tally_vk.messenger && tally_vk.f.vkDestroyDebugUtilsMessengerEXT) {
        tally_vk.f.vkDestroyDebugUtilsMessengerEXT(tally_vk.instance, tally_vk.messenger, NULL);
    }
    if (tally_vk.instance && tally_vk.f.vkDestroyInstance) {
        tally_vk.f.vkDestroyInstance(tally_vk.instance, NULL);
    }
    tally_vk.command_pool = VK_NULL_HANDLE;
    tally_vk.device = VK_NULL_HANDLE;
    tally_vk.queue = VK_NULL_HANDLE;
    tally_vk.messenger = VK_NULL_HANDLE;
    tally_vk.instance = VK_NULL_HANDLE;
    tally_vk.physical = VK_NULL_HANDLE;
    memset(&tally_vk.f, 0, sizeof(tally_vk.f));
}

// Picks the physical device (TALLY_VULKAN_DEVICE or the first usable one) and its compute queue
// family. Returns 0, or -1 with the reason in `why`.
static int select_device_locked(char *why, size_t why_size) {
    uint32_t count = 0;
    VkResult r = tally_vk.f.vkEnumeratePhysicalDevices(tally_vk.instance, &count, NULL);
    if (r != VK_SUCCESS || count == 0) {
        snprintf(why, why_size,
                 "no Vulkan physical device found (vkEnumeratePhysicalDevices: %s, %u devices; is "
                 "a driver such as Mesa lavapipe installed?)",
                 tally_vk_result_name(r), count);
        return -1;
    }
    VkPhysicalDevice *devices = (VkPhysicalDevice *)calloc(count, sizeof(VkPhysicalDevice));
    if (!devices) {
        snprintf(why, why_size, "out of memory enumerating Vulkan devices");
        return -1;
    }
    r = tally_vk.f.vkEnumeratePhysicalDevices(tally_vk.instance, &count, devices);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(devices);
        snprintf(why, why_size, "vkEnumeratePhysicalDevices failed: %s (%d)",
                 tally_vk_result_name(r), (int)r);
        return -1;
    }
    // An index (decimal digits only), else a part of the device's name.
    const char *selector = tally_env_string("TALLY_VULKAN_DEVICE");
    const int by_index =
        selector && strspn(selector, "0123456789") == strlen(selector) && strlen(selector) < 10;
    const long index = by_index ? strtol(selector, NULL, 10) : -1;
    char names[512] = "";
    int found = 0;
    for (uint32_t i = 0; i < count && !found; i++) {
        VkPhysicalDeviceProperties props;
        tally_vk.f.vkGetPhysicalDeviceProperties(devices[i], &props);
        size_t used = strlen(names);
        snprintf(names + used, sizeof(names) - used, "%s%u: %s", i ? ", " : "", i,
                 props.deviceName);
        if (selector && (by_index ? (long)i != index : !strstr(props.deviceName, selector))) {
            continue;
        }
        uint32_t num_families = 0;
        tally_vk.f.vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &num_families, NULL);
        VkQueueFamilyProperties families[64];
        if (num_families > 64) {
            num_families = 64;
        }
        tally_vk.f.vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &num_families, families);
        int32_t family = -1;
        for (uint32_t q = 0; q < num_families && family < 0; q++) {
            if ((families[q].queueFlags & VK_QUEUE_COMPUTE_BIT) && families[q].queueCount > 0) {
                family = (int32_t)q;
            }
        }
        const char *problem = family < 0                              ? "has no compute queue"
                              : props.apiVersion < VK_API_VERSION_1_1 ? "supports only Vulkan 1.0"
                                                                      : NULL;
        if (problem) {
            if (selector) {
                snprintf(why, why_size,
                         "the Vulkan device %u (%s) chosen by TALLY_VULKAN_DEVICE=%s %s", i,
                         props.deviceName, selector, problem);
                free(devices);
                return -1;
            }
            continue;
        }
        tally_vk.physical = devices[i];
        tally_vk.props = props;
        tally_vk.queue_family = (uint32_t)family;
        // Nonzero: the queue family supports timestamps (of that many valid bits).
        tally_vk.timestamp_bits = families[family].timestampValidBits;
        found = 1;
    }
    free(devices);
    if (!found) {
        if (selector) {
            snprintf(why, why_size, "no Vulkan device matches TALLY_VULKAN_DEVICE=%s (devices: %s)",
                     selector, names);
        } else {
            snprintf(why, why_size,
                     "no Vulkan device has a compute queue and Vulkan 1.1 (devices: %s)", names);
        }
        return -1;
    }
    return 0;
}

// Whether the selected physical device offers the device extension `name`.
static int has_device_extension(const char *name) {
    uint32_t n = 0;
    if (tally_vk.f.vkEnumerateDeviceExtensionProperties(tally_vk.physical, NULL, &n, NULL) !=
            VK_SUCCESS ||
        n == 0) {
        return 0;
    }
    VkExtensionProperties *props = (VkExtensionProperties *)calloc(n, sizeof(*props));
    int found = 0;
    if (props && tally_vk.f.vkEnumerateDeviceExtensionProperties(tally_vk.physical, NULL, &n,
                                                                 props) == VK_SUCCESS) {
        for (uint32_t i = 0; i < n && !found; i++) {
            found = strcmp(props[i].extensionName, name) == 0;
        }
    }
    free(props);
    return found;
}

// Creates the logical device with one compute queue, enabling the optional shader features a
// kernel may use (64/16/8-bit types and storage) where the device supports them.
static int create_device_locked(char *why, size_t why_size) {
    VkPhysicalDevice16BitStorageFeatures have16 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, NULL, 0, 0, 0, 0};
    VkPhysicalDevice8BitStorageFeatures have8 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, NULL, 0, 0, 0};
    VkPhysicalDeviceShaderFloat16Int8Features have_f16i8 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, NULL, 0, 0};
    // 8-bit storage and float16/int8 are core in 1.2; the instance asks for 1.2.
    int has12 = tally_vk.props.apiVersion >= VK_API_VERSION_1_2;
    if (has12) {
        have16.pNext = &have8;
        have8.pNext = &have_f16i8;
    }
    VkPhysicalDeviceFeatures2 have;
    memset(&have, 0, sizeof(have));
    have.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    have.pNext = &have16;
    tally_vk.f.vkGetPhysicalDeviceFeatures2(tally_vk.physical, &have);

    VkPhysicalDevice16BitStorageFeatures want16 = have16;
    VkPhysicalDevice8BitStorageFeatures want8 = have8;
    VkPhysicalDeviceShaderFloat16Int8Features want_f16i8 = have_f16i8;
    want16.pNext = has12 ? (void *)&want8 : NULL;
    want8.pNext = &want_f16i8;
    want_f16i8.pNext = NULL;
    VkPhysicalDeviceFeatures2 want;
    memset(&want, 0, sizeof(want));
    want.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    want.pNext = &want16;
    want.features.shaderInt64 = have.features.shaderInt64;
    want.features.shaderFloat64 = have.features.shaderFloat64;
    want.features.shaderInt16 = have.features.shaderInt16;

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info;
    memset(&queue_info, 0, sizeof(queue_info));
    queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    queue_info.queueFamilyIndex = tally_vk.queue_family;
    queue_info.queueCount = 1;
    queue_info.pQueuePriorities = &priority;
    VkDeviceCreateInfo device_info;
    memset(&device_info, 0, sizeof(device_info));
    device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    device_info.pNext = &want;
    device_info.queueCreateInfoCount = 1;
    device_info.pQueueCreateInfos = &queue_info;
    const char *calibrated_ext = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
    if (has_device_extension(calibrated_ext) &&
        tally_vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT) {
        device_info.enabledExtensionCount = 1;
        device_info.ppEnabledExtensionNames = &calibrated_ext;
    }
    VkResult r = tally_vk.f.vkCreateDevice(tally_vk.physical, &device_info, NULL, &tally_vk.device);
    if (r != VK_SUCCESS) {
        tally_vk.device = VK_NULL_HANDLE;
        snprintf(why, why_size, "vkCreateDevice failed for %s: %s (%d)", tally_vk.props.deviceName,
                 tally_vk_result_name(r), (int)r);
        return -1;
    }
#define TALLY_VK_LOAD_DEVICE(name)                                                                 \
    tally_vk.f.name = (PFN_##name)tally_vk.f.vkGetDeviceProcAddr(tally_vk.device, #name);          \
    if (!tally_vk.f.name) {                                                                        \
        snprintf(why, why_size, "the Vulkan driver of %s lacks %s", tally_vk.props.deviceName,     \
                 #name);                                                                           \
        return -1;                                                                                 \
    }
    TALLY_VK_DEVICE_FUNCS(TALLY_VK_LOAD_DEVICE)
#undef TALLY_VK_LOAD_DEVICE
    tally_vk.f.vkGetCalibratedTimestampsEXT =
        device_info.enabledExtensionCount
            ? (PFN_vkGetCalibratedTimestampsEXT)tally_vk.f.vkGetDeviceProcAddr(
                  tally_vk.device, "vkGetCalibratedTimestampsEXT")
            : NULL;
    tally_vk.f.vkGetDeviceQueue(tally_vk.device, tally_vk.queue_family, 0, &tally_vk.queue);
    VkCommandPoolCreateInfo pool_info;
    memset(&pool_info, 0, sizeof(pool_info));
    pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool_info.queueFamilyIndex = tally_vk.queue_family;
    r = tally_vk.f.vkCreateCommandPool(tally_vk.device, &pool_info, NULL, &tally_vk.command_pool);
    if (r != VK_SUCCESS) {
        tally_vk.command_pool = VK_NULL_HANDLE;
        snprintf(why, why_size, "vkCreateCommandPool failed: %s (%d)", tally_vk_result_name(r),
                 (int)r);
        return -1;
    }
    return 0;
}

// Opens the loader (once per process) and checks it offers Vulkan 1.1. Returns 0, or -1 with
// the reason in `why`.
static int open_loader_locked(char *why, size_t why_size) {
    if (!tally_vk.lib) {
        dlerror();
        tally_vk.lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!tally_vk.lib) {
            const char *e = dlerror();
            snprintf(why, why_size, "could not load the Vulkan loader libvulkan.so.1 (%s)",
                     e ? e : "dlopen failed");
            return -1;
        }
    }
    tally_vk.get_instance_proc_addr =
        (PFN_vkGetInstanceProcAddr)to_function(dlsym(tally_vk.lib, "vkGetInstanceProcAddr"));
    if (!tally_vk.get_instance_proc_addr) {
        snprintf(why, why_size, "the Vulkan loader libvulkan.so.1 has no vkGetInstanceProcAddr");
        return -1;
    }
    PFN_vkEnumerateInstanceVersion enumerate_version =
        (PFN_vkEnumerateInstanceVersion)tally_vk.get_instance_proc_addr(
            NULL, "vkEnumerateInstanceVersion");
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (enumerate_version && enumerate_version(&loader_version) != VK_SUCCESS) {
        loader_version = VK_API_VERSION_1_0;
    }
    if (loader_version < VK_API_VERSION_1_1) {
        snprintf(why, why_size, "the Vulkan loader supports only Vulkan 1.0; Tally needs 1.1");
        return -1;
    }
    return 0;
}

// TALLY_VULKAN_DEBUG's level, or 0 (said once through tally_print_diagnostic) when the loader lacks
// VK_EXT_debug_utils.
static int32_t debug_level(PFN_vkEnumerateInstanceExtensionProperties enumerate_extensions) {
    // 0: none; 1: warnings and errors; 2 and up: information too.
    int32_t debug = (int32_t)tally_env_int("TALLY_VULKAN_DEBUG", 0, 2, 0, "0 (no messages)");
    if (!debug) {
        return 0;
    }
    uint32_t n = 0;
    int have_debug_utils = 0;
    if (enumerate_extensions(NULL, &n, NULL) == VK_SUCCESS && n > 0) {
        VkExtensionProperties *ext =
            (VkExtensionProperties *)calloc(n, sizeof(VkExtensionProperties));
        if (ext && enumerate_extensions(NULL, &n, ext) >= 0) {
            for (uint32_t i = 0; i < n; i++) {
                if (strcmp(ext[i].extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) == 0) {
                    have_debug_utils = 1;
                }
            }
        }
        free(ext);
    }
    if (!have_debug_utils) {
        tally_print_diagnostic(NULL,
                               "Tally Vulkan: TALLY_VULKAN_DEBUG is set but VK_EXT_debug_utils is "
                               "not available; no messages will be printed\n");
        return 0;
    }
    return debug;
}

// Creates the instance (with the debug messenger at level `*debug`, which drops to 0 when the
// extension is missing) and loads its entry points. Returns 0, or -1 with the reason in `why`.
static int create_instance_locked(int32_t *debug, char *why, size_t why_size) {
    PFN_vkGetInstanceProcAddr gipa = tally_vk.get_instance_proc_addr;
    PFN_vkCreateInstance create_instance = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
    PFN_vkEnumerateInstanceExtensionProperties enumerate_extensions =
        (PFN_vkEnumerateInstanceExtensionProperties)gipa(NULL,
                                                         "vkEnumerateInstanceExtensionProperties");
    if (!create_instance || !enumerate_extensions) {
        snprintf(why, why_size, "the Vulkan loader lacks vkCreateInstance");
        return -1;
    }
    *debug = debug_level(enumerate_extensions);
    VkDebugUtilsMessengerCreateInfoEXT messenger_info;
    fill_messenger_info(&messenger_info, *debug);
    const char *extensions[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo app;
    memset(&app, 0, sizeof(app));
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "tally";
    app.pEngineName = "tally";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo instance_info;
    memset(&instance_info, 0, sizeof(instance_info));
    instance_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    // Chained, the messenger also reports problems of vkCreateInstance/vkDestroyInstance.
    instance_info.pNext = *debug ? &messenger_info : NULL;
    instance_info.pApplicationInfo = &app;
    instance_info.enabledExtensionCount = *debug ? 1 : 0;
    instance_info.ppEnabledExtensionNames = *debug ? extensions : NULL;
    VkResult r = create_instance(&instance_info, NULL, &tally_vk.instance);
    if (r != VK_SUCCESS) {
        tally_vk.instance = VK_NULL_HANDLE;
        snprintf(why, why_size, "vkCreateInstance failed: %s (%d)%s", tally_vk_result_name(r),
                 (int)r, r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver/ICD found)" : "");
        return -1;
    }
#define TALLY_VK_LOAD_INSTANCE(name)                                                               \
    tally_vk.f.name = (PFN_##name)gipa(tally_vk.instance, #name);                                  \
    if (!tally_vk.f.name) {                                                                        \
        snprintf(why, why_size, "the Vulkan loader lacks %s", #name);                              \
        return -1;                                                                                 \
    }
    TALLY_VK_INSTANCE_FUNCS(TALLY_VK_LOAD_INSTANCE)
#undef TALLY_VK_LOAD_INSTANCE
    tally_vk.f.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT =
        (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)gipa(
            tally_vk.instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT");
    if (*debug) {
        tally_vk.f.vkCreateDebugUtilsMessengerEXT = (PFN_vkCreateDebugUtilsMessengerEXT)gipa(
            tally_vk.instance, "vkCreateDebugUtilsMessengerEXT");
        tally_vk.f.vkDestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)gipa(
            tally_vk.instance, "vkDestroyDebugUtilsMessengerEXT");
        if (tally_vk.f.vkCreateDebugUtilsMessengerEXT &&
            tally_vk.f.vkDestroyDebugUtilsMessengerEXT &&
            tally_vk.f.vkCreateDebugUtilsMessengerEXT(tally_vk.instance, &messenger_info, NULL,
                                                      &tally_vk.messenger) != VK_SUCCESS) {
            tally_vk.messenger = VK_NULL_HANDLE;
        }
    }
    return 0;
}

int tally_vk_init_locked(char *why, size_t why_size) {
    if (tally_env_flag("TALLY_VULKAN_DISABLE")) {
        snprintf(why, why_size, "Vulkan is disabled by TALLY_VULKAN_DISABLE");
        return -1;
    }
    if (open_loader_locked(why, why_size) != 0) {
        return -1;
    }
    int32_t debug = 0;
    if (create_instance_locked(&debug, why, why_size) != 0 ||
        select_device_locked(why, why_size) != 0 || create_device_locked(why, why_size) != 0) {
        tally_vk_destroy_core_locked();
        return -1;
    }
    tally_vk.f.vkGetPhysicalDeviceMemoryProperties(tally_vk.physical, &tally_vk.memory);
    tally_vk.force_staging = tally_env_flag("TALLY_VULKAN_FORCE_STAGING");
    tally_vk.next_serial = 1;
    if (tally_env_flag("TALLY_VULKAN_NO_TIMESTAMPS")) {
        tally_vk.timestamp_bits = 0;
    }
    tally_vk.calibrated = 0;
    if (debug) {
        char msg[512];
        snprintf(msg, sizeof(msg), "Tally Vulkan: using %s (Vulkan %u.%u, queue family %u)%s\n",
                 tally_vk.props.deviceName, VK_API_VERSION_MAJOR(tally_vk.props.apiVersion),
                 VK_API_VERSION_MINOR(tally_vk.props.apiVersion), tally_vk.queue_family,
                 tally_vk.force_staging ? ", staging copies forced" : "");
        tally_print_diagnostic(NULL, msg);
    }
    return 0;
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
