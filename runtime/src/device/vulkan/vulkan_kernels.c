// Kernels: for each kernel table, a module cache (its device_state[TALLY_DEVICE_API_VULKAN],
// installed once with compare-exchange) holds per kernel the shader module, the descriptor set
// and pipeline layouts, and one compute pipeline per work-group size, built on the first launch
// that needs them (tally_vk_compile, in the one-time compile slot) and destroyed by release. A
// launch packs the scalar arguments into the push-constant block, binds the buffers through a
// descriptor set of its own, and records the dispatch, between timestamps when timed, into one
// submission (vulkan_submit.c) that every buffer it uses remembers as its last use. What every
// launch checks whatever the API is done before, by device_launch.c; this file checks what the
// device's limits decide: code, work-group size, grid, push constants, storage buffer range.
//
// Halide's own kernels (layout TALLY_KERNEL_LAYOUT_HALIDE_VULKAN: lowered text whose kernels
// Halide 21 compiled, tables made by halide_vulkan_initialize_kernels) take their arguments as
// Halide's runtime gives them: a launch packs the scalars tightly, in order, into a uniform
// buffer of its own (bound at 0 and released with the launch's submission), the storage buffers
// after it; the pipeline enters the kernel's own entry point, specialized with the work-group
// size and the shared array sized at launch where the kernel's binding header asks for them.

#include "core/error.h"
#include "device/backend.h"
#include "device/vulkan/vulkan_internal.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#if TALLY_HAVE_VULKAN_HEADERS

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The table's cache, without creating it (NULL when it does not exist yet).
static vk_module_cache *existing_cache(const tally_kernel_table *table) {
    return (vk_module_cache *)tally_device_state(table, TALLY_DEVICE_API_VULKAN);
}

// The pipeline for a work-group size (and a shared array's size), if it was built. The cache's
// lock held.
static VkPipeline find_pipeline_locked(const vk_kernel_state *ks, const int32_t threads[3],
                                       uint32_t shared_elems) {
    for (int32_t i = 0; i < ks->num_pipelines; i++) {
        const int32_t *t = ks->pipelines[i].threads;
        if (t[0] == threads[0] && t[1] == threads[1] && t[2] == threads[2] &&
            ks->pipelines[i].shared_elems == shared_elems) {
            return ks->pipelines[i].pipeline;
        }
    }
    return VK_NULL_HANDLE;
}

static int is_halide_kernel(const tally_kernel_source *k) {
    return k->layout == TALLY_KERNEL_LAYOUT_HALIDE_VULKAN;
}

// The bytes of a launch's scalar arguments, packed as Halide's kernels take them.
static int64_t scalar_bytes(const tally_device_launch *l) {
    int64_t n = 0;
    for (int32_t i = 0; i < l->num_args; i++) {
        n += l->arg_is_buffer[i] ? 0 : l->arg_sizes[i];
    }
    return n;
}

// The elements of a Halide kernel's shared array sized at launch (0 when it has none, or the
// launch asks for no more than the fixed arrays), as Halide's runtime works it out: the launch's
// shared bytes less the fixed arrays', over the element size.
static uint32_t shared_elems_of(const tally_hvk_header *h, int32_t shared_mem_bytes) {
    if (h->dynamic_shared_id == 0 || (uint64_t)shared_mem_bytes <= h->static_shared_bytes) {
        return 0;
    }
    return (uint32_t)(((uint64_t)shared_mem_bytes - h->static_shared_bytes) /
                      h->dynamic_shared_elem_bytes);
}

// Reads a Halide kernel's binding header into ks once. The cache's lock held.
static int32_t read_header_locked(void *user_context, const char *routine,
                                  const tally_kernel_source *ksrc, vk_kernel_state *ks) {
    if (ks->header_read) {
        return 0;
    }
    char why[256];
    if (!tally_hvk_read_header(ksrc->code, (size_t)ksrc->code_size, &ks->header, why, sizeof why)) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel %s: Halide's kernel module: %s", routine, ksrc->name,
                                  why);
    }
    ks->header_read = 1;
    return 0;
}

// Lays out the launch's scalar arguments in the push-constant block, each at the next offset
// aligned to its size, the block padded to a multiple of 4, and writes them into `out` when it
// is not NULL (room for TALLY_VK_MAX_PUSH_BYTES). Returns the block's size; -1 - i when scalar
// argument i does not fit (a size other than 1, 2, 4, 8, or beyond `limit` bytes).
static int64_t push_layout(const tally_device_launch *l, uint32_t limit, uint8_t *out) {
    uint32_t size = 0;
    if (is_halide_kernel(l->kernel)) {
        return 0;  // its scalars go in a uniform buffer
    }
    for (int32_t i = 0; i < l->num_args; i++) {
        if (l->arg_is_buffer[i]) {
            continue;
        }
        int64_t bytes = l->arg_sizes[i];
        if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) {
            return -1 - i;
        }
        uint32_t offset = (size + (uint32_t)bytes - 1) & ~((uint32_t)bytes - 1);
        if (offset + (uint32_t)bytes > limit) {
            return -1 - i;
        }
        if (out) {
            memset(out + size, 0, offset - size);
            memcpy(out + offset, l->args[i], (size_t)bytes);
        }
        size = offset + (uint32_t)bytes;
    }
    uint32_t padded = (size + 3) & ~3u;
    if (out) {
        memset(out + size, 0, padded - size);
    }
    return padded;
}

// The device's push-constant bytes (at most TALLY_VK_MAX_PUSH_BYTES).
static uint32_t push_limit(void) {
    uint32_t limit = tally_vk.props.limits.maxPushConstantsSize;
    return limit < TALLY_VK_MAX_PUSH_BYTES ? limit : TALLY_VK_MAX_PUSH_BYTES;
}

// The push-constant block of `l` (packed into `out` when not NULL), or a reported error.
static int32_t push_constants(void *user_context, const tally_device_launch *l, uint8_t *out,
                              int32_t *size) {
    const uint32_t limit = push_limit();
    int64_t n = push_layout(l, limit, out);
    if (n >= 0) {
        *size = (int32_t)n;
        return 0;
    }
    int32_t i = (int32_t)(-1 - n);
    int64_t bytes = l->arg_sizes[i];
    if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel %s, argument %d: a scalar of %lld bytes (scalars "
                                  "are 1, 2, 4 or 8 bytes)",
                                  l->routine, l->entry_name, (int)i, (long long)bytes);
    }
    return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                              "%s: kernel %s: its scalar arguments need more than the device's "
                              "%u bytes of push constants",
                              l->routine, l->entry_name, limit);
}

// The table's cache, created on first use (compare-exchange: concurrent first launches agree).
static vk_module_cache *cache_of(tally_kernel_table *table) {
    vk_module_cache *cache = existing_cache(table);
    if (cache) {
        return cache;
    }
    vk_module_cache *fresh = (vk_module_cache *)calloc(1, sizeof(vk_module_cache));
    if (!fresh) {
        return NULL;
    }
    fresh->num_kernels = table->num_kernels;
    fresh->kernels = (vk_kernel_state *)calloc(
        (size_t)(table->num_kernels > 0 ? table->num_kernels : 1), sizeof(vk_kernel_state));
    if (!fresh->kernels) {
        free(fresh);
        return NULL;
    }
    for (int32_t i = 0; i < table->num_kernels; i++) {
        fresh->kernels[i].push_size = -1;
    }
    pthread_mutex_init(&fresh->lock, NULL);
    vk_module_cache *won =
        (vk_module_cache *)tally_device_state_install(table, TALLY_DEVICE_API_VULKAN, fresh);
    if (won != fresh) {
        pthread_mutex_destroy(&fresh->lock);
        free(fresh->kernels);
        free(fresh);
        return won;
    }
    pthread_mutex_lock(&tally_vk_lock);
    fresh->next = tally_vk.caches;
    tally_vk.caches = fresh;
    pthread_mutex_unlock(&tally_vk_lock);
    return fresh;
}

// The pipeline of a kernel for a work-group size, creating its shader module, layouts and
// pipeline on first use. The cache's lock held.
static int32_t get_pipeline_locked(void *user_context, const char *routine,
                                   const tally_kernel_source *ksrc, vk_kernel_state *ks,
                                   int32_t push_size, const int32_t threads[3],
                                   int32_t shared_mem_bytes, VkPipeline *pipeline) {
    const int32_t code = TALLY_ERROR_DEVICE_RUN_FAILED;
    const int halide = is_halide_kernel(ksrc);
    VkResult r;
    if (halide) {
        int32_t hr = read_header_locked(user_context, routine, ksrc, ks);
        if (hr != 0) {
            return hr;
        }
    }
    const uint8_t *spirv = halide ? (const uint8_t *)ks->header.spirv : ksrc->code;
    const size_t spirv_bytes = halide ? ks->header.spirv_bytes : (size_t)ksrc->code_size;
    const uint32_t shared_elems = halide ? shared_elems_of(&ks->header, shared_mem_bytes) : 0;
    if (!ks->module) {
        VkShaderModuleCreateInfo info;
        memset(&info, 0, sizeof(info));
        info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
        info.codeSize = spirv_bytes;
        uint32_t *copy = NULL;
        if (((uintptr_t)spirv & 3) != 0) {
            copy = (uint32_t *)malloc(spirv_bytes);
            if (!copy) {
                return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                          routine, ksrc->name);
            }
            memcpy(copy, spirv, spirv_bytes);
            info.pCode = copy;
        } else {
            info.pCode = (const uint32_t *)(const void *)spirv;
        }
        r = tally_vk.f.vkCreateShaderModule(tally_vk.device, &info, NULL, &ks->module);
        free(copy);
        if (r != VK_SUCCESS) {
            ks->module = VK_NULL_HANDLE;
            return tally_report_error(user_context, code,
                                      "%s: vkCreateShaderModule failed for kernel %s: %s (%d)",
                                      routine, ksrc->name, tally_vk_result_name(r), (int)r);
        }
    }
    if (ks->push_size < 0) {
        // Halide's kernels: the uniform buffer of scalars at binding 0, when they have one.
        const int32_t uniform = halide ? (int32_t)ks->header.uniform_buffers : 0;
        const int32_t num_bindings = ksrc->num_buffers + uniform;
        if (num_bindings > 0 && !ks->set_layout) {
            VkDescriptorSetLayoutBinding *bindings = (VkDescriptorSetLayoutBinding *)calloc(
                (size_t)num_bindings, sizeof(VkDescriptorSetLayoutBinding));
            if (!bindings) {
                return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                          routine, ksrc->name);
            }
            for (int32_t i = 0; i < num_bindings; i++) {
                bindings[i].binding = (uint32_t)i;
                bindings[i].descriptorType = i < uniform ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER
                                                         : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
                bindings[i].descriptorCount = 1;
                bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
            }
            VkDescriptorSetLayoutCreateInfo info;
            memset(&info, 0, sizeof(info));
            info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
            info.bindingCount = (uint32_t)num_bindings;
            info.pBindings = bindings;
            r = tally_vk.f.vkCreateDescriptorSetLayout(tally_vk.device, &info, NULL,
                                                       &ks->set_layout);
            free(bindings);
            if (r != VK_SUCCESS) {
                ks->set_layout = VK_NULL_HANDLE;
                return tally_report_error(user_context, code,
                                          "%s: vkCreateDescriptorSetLayout failed for kernel %s: "
                                          "%s (%d)",
                                          routine, ksrc->name, tally_vk_result_name(r), (int)r);
            }
        }
        VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)push_size};
        VkPipelineLayoutCreateInfo info;
        memset(&info, 0, sizeof(info));
        info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
        info.setLayoutCount = ks->set_layout ? 1 : 0;
        info.pSetLayouts = ks->set_layout ? &ks->set_layout : NULL;
        info.pushConstantRangeCount = push_size > 0 ? 1 : 0;
        info.pPushConstantRanges = push_size > 0 ? &range : NULL;
        r = tally_vk.f.vkCreatePipelineLayout(tally_vk.device, &info, NULL, &ks->layout);
        if (r != VK_SUCCESS) {
            ks->layout = VK_NULL_HANDLE;
            return tally_report_error(user_context, code,
                                      "%s: vkCreatePipelineLayout failed for kernel %s: %s (%d)",
                                      routine, ksrc->name, tally_vk_result_name(r), (int)r);
        }
        ks->push_size = push_size;
    } else if (ks->push_size != push_size) {
        return tally_report_error(user_context, code,
                                  "%s: kernel %s was launched before with %d bytes of scalar "
                                  "arguments, now with %d",
                                  routine, ksrc->name, ks->push_size, push_size);
    }
    *pipeline = find_pipeline_locked(ks, threads, shared_elems);
    if (*pipeline) {
        return 0;
    }
    if (ks->num_pipelines == ks->cap_pipelines) {
        int32_t cap = ks->cap_pipelines ? ks->cap_pipelines * 2 : 4;
        vk_pipeline_entry *grown =
            (vk_pipeline_entry *)realloc(ks->pipelines, (size_t)cap * sizeof(vk_pipeline_entry));
        if (!grown) {
            return tally_report_error(user_context, code, "%s: kernel %s: out of host memory",
                                      routine, ksrc->name);
        }
        ks->pipelines = grown;
        ks->cap_pipelines = cap;
    }
    // Tally's kernels: the work-group size as constants 0, 1, 2. Halide's: as the constants its
    // header names (none when its SPIR-V fixes the size), and the shared array sized at launch.
    uint32_t spec_data[4] = {(uint32_t)threads[0], (uint32_t)threads[1], (uint32_t)threads[2],
                             shared_elems};
    VkSpecializationMapEntry entries[4] = {
        {0, 0, 4},
        {1, 4, 4},
        {2, 8, 4},
    };
    uint32_t num_entries = 3;
    if (halide) {
        num_entries = 0;
        for (uint32_t d = 0; d < 3; d++) {
            if (ks->header.local_size_ids[d] != 0) {
                entries[num_entries++] =
                    (VkSpecializationMapEntry){ks->header.local_size_ids[d], (uint32_t)(4 * d), 4};
            }
        }
        if (shared_elems != 0) {
            entries[num_entries++] =
                (VkSpecializationMapEntry){ks->header.dynamic_shared_id, 12, 4};
        }
    }
    VkSpecializationInfo spec = {num_entries, entries, sizeof(spec_data), spec_data};
    VkComputePipelineCreateInfo info;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = ks->module;
    info.stage.pName = halide ? ksrc->name : "main";
    info.stage.pSpecializationInfo = num_entries ? &spec : NULL;
    info.layout = ks->layout;
    info.basePipelineIndex = -1;
    VkPipeline created = VK_NULL_HANDLE;
    r = tally_vk.f.vkCreateComputePipelines(tally_vk.device, VK_NULL_HANDLE, 1, &info, NULL,
                                            &created);
    if (r != VK_SUCCESS) {
        return tally_report_error(user_context, code,
                                  "%s: vkCreateComputePipelines failed for kernel %s with "
                                  "work-group size %dx%dx%d: %s (%d)",
                                  routine, ksrc->name, threads[0], threads[1], threads[2],
                                  tally_vk_result_name(r), (int)r);
    }
    vk_pipeline_entry *e = &ks->pipelines[ks->num_pipelines++];
    e->threads[0] = threads[0];
    e->threads[1] = threads[1];
    e->threads[2] = threads[2];
    e->shared_elems = shared_elems;
    e->pipeline = created;
    *pipeline = created;
    return 0;
}

int tally_vk_kernel_ready(const tally_device_launch *l) {
    vk_module_cache *cache = existing_cache(l->table);
    int64_t push = push_layout(l, push_limit(), NULL);
    if (!cache || l->kernel_index >= cache->num_kernels || push < 0) {
        return 0;
    }
    pthread_mutex_lock(&cache->lock);
    const vk_kernel_state *ks = &cache->kernels[l->kernel_index];
    const uint32_t shared_elems = is_halide_kernel(l->kernel) && ks->header_read
                                      ? shared_elems_of(&ks->header, l->shared_mem_bytes)
                                      : 0;
    int ready =
        ks->module && ks->push_size == push && find_pipeline_locked(ks, l->threads, shared_elems);
    pthread_mutex_unlock(&cache->lock);
    return ready;
}

// The kernel's cache entry and its pipeline for the launch's work-group size, built if missing.
static int32_t pipeline_of(void *user_context, const tally_device_launch *l, int32_t push_size,
                           VkPipeline *pipeline, VkPipelineLayout *layout,
                           VkDescriptorSetLayout *set_layout) {
    vk_module_cache *cache = cache_of(l->table);
    if (!cache) {
        return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                  "%s: kernel %s: out of host memory", l->routine, l->entry_name);
    }
    if (l->kernel_index >= cache->num_kernels) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel %s: the kernel table grew after its first launch "
                                  "(%d kernels, then %d)",
                                  l->routine, l->entry_name, (int)cache->num_kernels,
                                  (int)l->table->num_kernels);
    }
    pthread_mutex_lock(&cache->lock);
    vk_kernel_state *ks = &cache->kernels[l->kernel_index];
    int32_t r = 0;
    // A Halide kernel's launch against its binding header, before anything is built.
    if (is_halide_kernel(l->kernel)) {
        r = read_header_locked(user_context, l->routine, l->kernel, ks);
        if (r == 0 && (scalar_bytes(l) > 0) != (ks->header.uniform_buffers == 1)) {
            r = tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                   "%s: kernel %s: launched with %lld bytes of scalar arguments, "
                                   "but its binding header declares %u uniform buffers for them",
                                   l->routine, l->entry_name, (long long)scalar_bytes(l),
                                   ks->header.uniform_buffers);
        }
    }
    if (r == 0) {
        r = get_pipeline_locked(user_context, l->routine, l->kernel, ks, push_size, l->threads,
                                l->shared_mem_bytes, pipeline);
    }
    *layout = ks->layout;
    *set_layout = ks->set_layout;
    pthread_mutex_unlock(&cache->lock);
    return r;
}

int32_t tally_vk_compile(void *user_context, const tally_device_launch *l) {
    const tally_kernel_source *k = l->kernel;
    if (!k->code || k->code_size == 0 || k->code_size % 4 != 0) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel %s has no valid SPIR-V (%llu bytes; must be a "
                                  "non-zero multiple of 4)",
                                  l->routine, l->entry_name, (unsigned long long)k->code_size);
    }
    const VkPhysicalDeviceLimits *limits = &tally_vk.props.limits;
    const int32_t *t = l->threads;
    uint64_t invocations = (uint64_t)t[0] * (uint64_t)t[1] * (uint64_t)t[2];
    if ((uint32_t)t[0] > limits->maxComputeWorkGroupSize[0] ||
        (uint32_t)t[1] > limits->maxComputeWorkGroupSize[1] ||
        (uint32_t)t[2] > limits->maxComputeWorkGroupSize[2] ||
        invocations > limits->maxComputeWorkGroupInvocations) {
        return tally_report_error(
            user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
            "%s: kernel %s: work groups of %dx%dx%d threads are invalid on "
            "%s (at most %ux%ux%u threads, %u in all)",
            l->routine, l->entry_name, t[0], t[1], t[2], tally_vk.props.deviceName,
            limits->maxComputeWorkGroupSize[0], limits->maxComputeWorkGroupSize[1],
            limits->maxComputeWorkGroupSize[2], limits->maxComputeWorkGroupInvocations);
    }
    int32_t push_size = 0;
    int32_t r = push_constants(user_context, l, NULL, &push_size);
    if (r != 0) {
        return r;
    }
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
    return pipeline_of(user_context, l, push_size, &pipeline, &layout, &set_layout);
}

// Checks what the device's limits decide about a launch (beyond its work-group size, checked by
// compile) and finds its buffers' allocations (vbufs: num_buffers of them).
static int32_t check_launch(void *user_context, const tally_device_launch *l, vk_buffer **vbufs) {
    const VkPhysicalDeviceLimits *limits = &tally_vk.props.limits;
    if (l->shared_mem_bytes != 0 && !is_halide_kernel(l->kernel)) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel %s asks for %d bytes of dynamic shared memory; the "
                                  "Vulkan back end supports none (declare shared arrays in the "
                                  "shader)",
                                  l->routine, l->entry_name, (int)l->shared_mem_bytes);
    }
    const int32_t *g = l->blocks;
    for (int d = 0; d < 3; d++) {
        if ((uint32_t)g[d] > limits->maxComputeWorkGroupCount[d]) {
            return tally_report_error(
                user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                "%s: kernel %s: a grid of %dx%dx%d work groups is invalid "
                "on %s (at most %ux%ux%u)",
                l->routine, l->entry_name, g[0], g[1], g[2], tally_vk.props.deviceName,
                limits->maxComputeWorkGroupCount[0], limits->maxComputeWorkGroupCount[1],
                limits->maxComputeWorkGroupCount[2]);
        }
    }
    for (int32_t i = 0, b = 0; i < l->num_args; i++) {
        if (!l->arg_is_buffer[i]) {
            continue;
        }
        char what[160];
        snprintf(what, sizeof(what), "%s: kernel %s, argument %d", l->routine, l->entry_name,
                 (int)i);
        int32_t r = tally_vk_buffer_of(user_context, (const halide_buffer_t *)l->args[i], what,
                                       TALLY_ERROR_DEVICE_RUN_FAILED, &vbufs[b]);
        if (r != 0) {
            return r;
        }
        if (vbufs[b]->size > limits->maxStorageBufferRange) {
            return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                      "%s: a buffer of %llu bytes exceeds the device's storage "
                                      "buffer range of %u",
                                      what, (unsigned long long)vbufs[b]->size,
                                      limits->maxStorageBufferRange);
        }
        b++;
    }
    return 0;
}

// A descriptor set of its own for the launch (in p->descriptor_pool), binding the uniform buffer
// of scalars first when there is one (Halide's kernels), then the buffers in order. tally_vk_lock
// held.
static int32_t bind_buffers_locked(void *user_context, const tally_device_launch *l,
                                   vk_buffer *const *vbufs, VkBuffer uniform,
                                   VkDescriptorSetLayout set_layout, vk_pending *p,
                                   VkDescriptorSet *set) {
    const int32_t u = uniform != VK_NULL_HANDLE ? 1 : 0;
    const int32_t n = l->num_buffers + u;
    VkDescriptorPoolSize pool_sizes[2] = {
        {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, (uint32_t)(l->num_buffers > 0 ? l->num_buffers : 1)},
        {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1},
    };
    VkDescriptorPoolCreateInfo pool_info;
    memset(&pool_info, 0, sizeof(pool_info));
    pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pool_info.maxSets = 1;
    pool_info.poolSizeCount = (uint32_t)(1 + u);
    pool_info.pPoolSizes = pool_sizes;
    VkResult vr =
        tally_vk.f.vkCreateDescriptorPool(tally_vk.device, &pool_info, NULL, &p->descriptor_pool);
    if (vr != VK_SUCCESS) {
        p->descriptor_pool = VK_NULL_HANDLE;
        return tally_vk_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, l->routine,
                             "vkCreateDescriptorPool", vr);
    }
    VkDescriptorSetAllocateInfo alloc;
    memset(&alloc, 0, sizeof(alloc));
    alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    alloc.descriptorPool = p->descriptor_pool;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &set_layout;
    vr = tally_vk.f.vkAllocateDescriptorSets(tally_vk.device, &alloc, set);
    if (vr != VK_SUCCESS) {
        return tally_vk_fail(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, l->routine,
                             "vkAllocateDescriptorSets", vr);
    }
    VkDescriptorBufferInfo *infos =
        (VkDescriptorBufferInfo *)calloc((size_t)n, sizeof(VkDescriptorBufferInfo));
    VkWriteDescriptorSet *writes =
        (VkWriteDescriptorSet *)calloc((size_t)n, sizeof(VkWriteDescriptorSet));
    int32_t r = 0;
    if (!infos || !writes) {
        r = tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                               "%s: kernel %s: out of host memory", l->routine, l->entry_name);
    } else {
        for (int32_t b = 0; b < n; b++) {
            infos[b].buffer = b < u ? uniform : vbufs[b - u]->buffer;
            infos[b].offset = 0;
            infos[b].range = VK_WHOLE_SIZE;
            writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
            writes[b].dstSet = *set;
            writes[b].dstBinding = (uint32_t)b;
            writes[b].descriptorCount = 1;
            writes[b].descriptorType =
                b < u ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
            writes[b].pBufferInfo = &infos[b];
        }
        tally_vk.f.vkUpdateDescriptorSets(tally_vk.device, (uint32_t)n, writes, 0, NULL);
    }
    free(infos);
    free(writes);
    return r;
}

// Records the dispatch (bracketed by timestamps when `timed`) and submits it. tally_vk_lock
// held; frees `p` on failure.
static int32_t record_and_submit_locked(void *user_context, const tally_device_launch *l, int timed,
                                        vk_buffer *const *vbufs, VkPipeline pipeline,
                                        VkPipelineLayout layout, VkDescriptorSetLayout set_layout,
                                        const uint8_t *push, int32_t push_size, vk_pending *p) {
    const int32_t code = TALLY_ERROR_DEVICE_RUN_FAILED;
    VkDescriptorSet set = VK_NULL_HANDLE;
    int32_t r = 0;
    if (l->num_buffers > 0 || p->staging) {
        // p->staging: a Halide kernel's uniform buffer of scalars (tally_vk_launch)
        r = bind_buffers_locked(user_context, l, vbufs, p->staging, set_layout, p, &set);
    }
    if (r == 0) {
        r = tally_vk_begin_commands_locked(user_context, code, l->routine, &p->cmd);
    }
    if (r != 0) {
        tally_vk_free_pending_locked(p);
        return r;
    }
    VkQueryPool query_pool = timed ? tally_vk_begin_timestamp_locked(p, &l->owner) : VK_NULL_HANDLE;
    tally_vk.f.vkCmdBindPipeline(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (set) {
        tally_vk.f.vkCmdBindDescriptorSets(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1,
                                           &set, 0, NULL);
    }
    if (push_size > 0) {
        tally_vk.f.vkCmdPushConstants(p->cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                      (uint32_t)push_size, push);
    }
    tally_vk.f.vkCmdDispatch(p->cmd, (uint32_t)l->blocks[0], (uint32_t)l->blocks[1],
                             (uint32_t)l->blocks[2]);
    tally_vk_end_timestamp_locked(p, query_pool);
    r = tally_vk_submit_locked(user_context, code, l->routine, p);
    if (r == 0) {
        for (int32_t b = 0; b < l->num_buffers; b++) {
            vbufs[b]->last_use = tally_vk.next_serial - 1;
        }
    }
    return r;
}

int32_t tally_vk_launch(void *user_context, const tally_device_launch *l, int timed) {
    vk_buffer *stack_vbufs[16];
    vk_buffer **vbufs = stack_vbufs;
    if (l->num_buffers > 16) {
        vbufs = (vk_buffer **)calloc((size_t)l->num_buffers, sizeof(vk_buffer *));
        if (!vbufs) {
            return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                      "%s: kernel %s: out of host memory", l->routine,
                                      l->entry_name);
        }
    }
    uint8_t push[TALLY_VK_MAX_PUSH_BYTES];
    int32_t push_size = 0;
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    int32_t r = check_launch(user_context, l, vbufs);
    if (r == 0) {
        r = push_constants(user_context, l, push, &push_size);
    }
    if (r == 0) {
        r = pipeline_of(user_context, l, push_size, &pipeline, &layout, &set_layout);
    }
    if (r == 0) {
        r = tally_vk_throttle(user_context, l->routine);
    }
    // A Halide kernel's scalars, packed in order without padding into a uniform buffer that the
    // submission keeps (as its staging buffer) until it completes.
    vk_staging uniform;
    memset(&uniform, 0, sizeof(uniform));
    const int64_t uniform_bytes = is_halide_kernel(l->kernel) ? scalar_bytes(l) : 0;
    if (r == 0 && uniform_bytes > 0) {
        r = tally_vk_create_staging(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, l->routine,
                                    (VkDeviceSize)((uniform_bytes + 15) & ~(int64_t)15),
                                    VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT, &uniform);
    }
    if (r == 0 && uniform.buffer) {
        uint8_t *at = (uint8_t *)uniform.mapped;
        for (int32_t i = 0; i < l->num_args; i++) {
            if (!l->arg_is_buffer[i]) {
                memcpy(at, l->args[i], (size_t)l->arg_sizes[i]);
                at += l->arg_sizes[i];
            }
        }
        if (!uniform.coherent) {
            tally_vk_flush_mapped(uniform.memory);
        }
    }
    vk_pending *p = NULL;
    if (r == 0) {
        p = (vk_pending *)calloc(1, sizeof(vk_pending));
        if (!p) {
            r = tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                   "%s: kernel %s: out of host memory", l->routine, l->entry_name);
        }
    }
    if (p) {
        p->staging = uniform.buffer;
        p->staging_memory = uniform.memory;
    } else {
        tally_vk_destroy_staging(&uniform);
    }
    if (r == 0) {
        pthread_mutex_lock(&tally_vk_lock);
        r = record_and_submit_locked(user_context, l, timed, vbufs, pipeline, layout, set_layout,
                                     push, push_size, p);
        pthread_mutex_unlock(&tally_vk_lock);
    }
    if (vbufs != stack_vbufs) {
        free(vbufs);
    }
    return r;
}

void tally_vk_kernels_teardown_locked(void) {
    for (vk_module_cache *c = tally_vk.caches; c; c = c->next) {
        pthread_mutex_lock(&c->lock);
        for (int32_t k = 0; k < c->num_kernels; k++) {
            vk_kernel_state *ks = &c->kernels[k];
            for (int32_t i = 0; i < ks->num_pipelines; i++) {
                tally_vk.f.vkDestroyPipeline(tally_vk.device, ks->pipelines[i].pipeline, NULL);
            }
            free(ks->pipelines);
            if (ks->layout) {
                tally_vk.f.vkDestroyPipelineLayout(tally_vk.device, ks->layout, NULL);
            }
            if (ks->set_layout) {
                tally_vk.f.vkDestroyDescriptorSetLayout(tally_vk.device, ks->set_layout, NULL);
            }
            if (ks->module) {
                tally_vk.f.vkDestroyShaderModule(tally_vk.device, ks->module, NULL);
            }
            memset(ks, 0, sizeof(*ks));
            ks->push_size = -1;
        }
        pthread_mutex_unlock(&c->lock);
    }
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
