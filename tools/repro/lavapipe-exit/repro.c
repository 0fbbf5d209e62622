// Minimal lavapipe exit-while-in-flight reproducer (no Tally). Creates N compute pipelines that
// differ by a specialization constant (so each needs its own LLVM compile, which lavapipe/llvmpipe
// does lazily at dispatch time, on its queue thread), submits one dispatch per pipeline, and then
// exits WITHOUT waiting.  Shader source: shader.comp (glslangValidator -V -g0 shader.comp -x).
//
// usage: repro [npipes=16] [iters=256] [groups=4] [mode]
//   mode "plain"   : exit(0) right after vkQueueSubmit (default)
//   mode "atexit"  : atexit(handler -> vkDeviceWaitIdle + destroy) registered right after
//                    vkCreateDevice, before any shader compile (what Tally does)
//   mode "late"    : a waited warm-up dispatch first, and the handler registered only after the
//                    final vkQueueSubmit (so LLVM's lazily built statics already exist)
//   mode "wait"    : vkDeviceWaitIdle before exit (control)
//   mode "warm"    : a waited warm-up dispatch first, then mode "atexit"-style registration
//   mode "pinned"  : as "atexit", but first calls libLLVM-15's LLVMCreateGDBRegistrationListener()
//                    so that the JIT listener's static is built (and its destructor registered)
//                    before the handler: shows that this static's destructor is what breaks
//                    "atexit"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        VkResult r_ = (x);                                                                         \
        if (r_ != VK_SUCCESS) {                                                                    \
            fprintf(stderr, "%s failed: %d\n", #x, (int)r_);                                       \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static const uint32_t spirv[] = {
    0x07230203, 0x00010000, 0x0008000b, 0x00000066, 0x00000000, 0x00020011, 0x00000001, 0x0006000b,
    0x00000001, 0x4c534c47, 0x6474732e, 0x3035342e, 0x00000000, 0x0003000e, 0x00000000, 0x00000001,
    0x0006000f, 0x00000005, 0x00000004, 0x6e69616d, 0x00000000, 0x0000000b, 0x00060010, 0x00000004,
    0x00000011, 0x00000040, 0x00000001, 0x00000001, 0x00040047, 0x0000000b, 0x0000000b, 0x0000001c,
    0x00040047, 0x00000014, 0x00000006, 0x00000010, 0x00050048, 0x00000015, 0x00000000, 0x00000023,
    0x00000000, 0x00030047, 0x00000015, 0x00000003, 0x00040047, 0x00000017, 0x00000022, 0x00000000,
    0x00040047, 0x00000017, 0x00000021, 0x00000000, 0x00040047, 0x00000025, 0x00000001, 0x00000000,
    0x00040047, 0x00000030, 0x00000001, 0x00000001, 0x00040047, 0x00000065, 0x0000000b, 0x00000019,
    0x00020013, 0x00000002, 0x00030021, 0x00000003, 0x00000002, 0x00040015, 0x00000006, 0x00000020,
    0x00000000, 0x00040020, 0x00000007, 0x00000007, 0x00000006, 0x00040017, 0x00000009, 0x00000006,
    0x00000003, 0x00040020, 0x0000000a, 0x00000001, 0x00000009, 0x0004003b, 0x0000000a, 0x0000000b,
    0x00000001, 0x0004002b, 0x00000006, 0x0000000c, 0x00000000, 0x00040020, 0x0000000d, 0x00000001,
    0x00000006, 0x00030016, 0x00000010, 0x00000020, 0x00040017, 0x00000011, 0x00000010, 0x00000004,
    0x00040020, 0x00000012, 0x00000007, 0x00000011, 0x0003001d, 0x00000014, 0x00000011, 0x0003001e,
    0x00000015, 0x00000014, 0x00040020, 0x00000016, 0x00000002, 0x00000015, 0x0004003b, 0x00000016,
    0x00000017, 0x00000002, 0x00040015, 0x00000018, 0x00000020, 0x00000001, 0x0004002b, 0x00000018,
    0x00000019, 0x00000000, 0x00040020, 0x0000001b, 0x00000002, 0x00000011, 0x00040017, 0x0000001e,
    0x00000018, 0x00000004, 0x00040020, 0x0000001f, 0x00000007, 0x0000001e, 0x0004002b, 0x00000010,
    0x00000022, 0x40e00000, 0x00040032, 0x00000018, 0x00000025, 0x00000001, 0x00070033, 0x0000001e,
    0x00000026, 0x00000025, 0x00000025, 0x00000025, 0x00000025, 0x00040020, 0x00000028, 0x00000007,
    0x00000018, 0x00040032, 0x00000018, 0x00000030, 0x00000100, 0x00020014, 0x00000031, 0x0004002b,
    0x00000018, 0x00000044, 0x00000003, 0x0004002b, 0x00000018, 0x00000045, 0x00000005, 0x0004002b,
    0x00000018, 0x00000046, 0x00000007, 0x00070033, 0x0000001e, 0x00000047, 0x00000025, 0x00000044,
    0x00000045, 0x00000046, 0x0004002b, 0x00000018, 0x0000004c, 0x00000001, 0x0004002b, 0x00000018,
    0x0000004d, 0x00000002, 0x00060034, 0x00000018, 0x0000004e, 0x000000c7, 0x00000025, 0x00000046,
    0x00070033, 0x0000001e, 0x0000004f, 0x0000004c, 0x0000004d, 0x00000044, 0x0000004e, 0x0004002b,
    0x00000006, 0x00000063, 0x00000040, 0x0004002b, 0x00000006, 0x00000064, 0x00000001, 0x0006002c,
    0x00000009, 0x00000065, 0x00000063, 0x00000064, 0x00000064, 0x00050036, 0x00000002, 0x00000004,
    0x00000000, 0x00000003, 0x000200f8, 0x00000005, 0x0004003b, 0x00000007, 0x00000008, 0x00000007,
    0x0004003b, 0x00000012, 0x00000013, 0x00000007, 0x0004003b, 0x0000001f, 0x00000020, 0x00000007,
    0x0004003b, 0x00000028, 0x00000029, 0x00000007, 0x00050041, 0x0000000d, 0x0000000e, 0x0000000b,
    0x0000000c, 0x0004003d, 0x00000006, 0x0000000f, 0x0000000e, 0x0003003e, 0x00000008, 0x0000000f,
    0x0004003d, 0x00000006, 0x0000001a, 0x00000008, 0x00060041, 0x0000001b, 0x0000001c, 0x00000017,
    0x00000019, 0x0000001a, 0x0004003d, 0x00000011, 0x0000001d, 0x0000001c, 0x0003003e, 0x00000013,
    0x0000001d, 0x0004003d, 0x00000011, 0x00000021, 0x00000013, 0x0005008e, 0x00000011, 0x00000023,
    0x00000021, 0x00000022, 0x0004006e, 0x0000001e, 0x00000024, 0x00000023, 0x000500c6, 0x0000001e,
    0x00000027, 0x00000024, 0x00000026, 0x0003003e, 0x00000020, 0x00000027, 0x0003003e, 0x00000029,
    0x00000019, 0x000200f9, 0x0000002a, 0x000200f8, 0x0000002a, 0x000400f6, 0x0000002c, 0x0000002d,
    0x00000000, 0x000200f9, 0x0000002e, 0x000200f8, 0x0000002e, 0x0004003d, 0x00000018, 0x0000002f,
    0x00000029, 0x000500b1, 0x00000031, 0x00000032, 0x0000002f, 0x00000030, 0x000400fa, 0x00000032,
    0x0000002b, 0x0000002c, 0x000200f8, 0x0000002b, 0x0004003d, 0x00000011, 0x00000033, 0x00000013,
    0x0004003d, 0x00000018, 0x00000034, 0x00000029, 0x00050080, 0x00000018, 0x00000035, 0x00000025,
    0x00000034, 0x0004006f, 0x00000010, 0x00000036, 0x00000035, 0x0005008e, 0x00000011, 0x00000037,
    0x00000033, 0x00000036, 0x0006000c, 0x00000011, 0x00000038, 0x00000001, 0x0000000d, 0x00000037,
    0x0004003d, 0x00000011, 0x00000039, 0x00000013, 0x0009004f, 0x00000011, 0x0000003a, 0x00000039,
    0x00000039, 0x00000001, 0x00000002, 0x00000003, 0x00000000, 0x0006000c, 0x00000011, 0x0000003b,
    0x00000001, 0x0000000e, 0x0000003a, 0x0004003d, 0x00000011, 0x0000003c, 0x00000013, 0x0009004f,
    0x00000011, 0x0000003d, 0x0000003c, 0x0000003c, 0x00000003, 0x00000000, 0x00000001, 0x00000002,
    0x0006000c, 0x00000011, 0x0000003e, 0x00000001, 0x00000004, 0x0000003d, 0x0004007f, 0x00000011,
    0x0000003f, 0x0000003e, 0x0006000c, 0x00000011, 0x00000040, 0x00000001, 0x0000001b, 0x0000003f,
    0x00050085, 0x00000011, 0x00000041, 0x0000003b, 0x00000040, 0x00050081, 0x00000011, 0x00000042,
    0x00000038, 0x00000041, 0x0003003e, 0x00000013, 0x00000042, 0x0004003d, 0x0000001e, 0x00000043,
    0x00000020, 0x00050084, 0x0000001e, 0x00000048, 0x00000043, 0x00000047, 0x0004003d, 0x00000018,
    0x00000049, 0x00000029, 0x00070050, 0x0000001e, 0x0000004a, 0x00000049, 0x00000049, 0x00000049,
    0x00000049, 0x00050080, 0x0000001e, 0x0000004b, 0x00000048, 0x0000004a, 0x000500c3, 0x0000001e,
    0x00000050, 0x0000004b, 0x0000004f, 0x0003003e, 0x00000020, 0x00000050, 0x0004003d, 0x00000018,
    0x00000051, 0x00000029, 0x000500c7, 0x00000018, 0x00000052, 0x00000051, 0x00000025, 0x000500aa,
    0x00000031, 0x00000053, 0x00000052, 0x0000004c, 0x000300f7, 0x00000055, 0x00000000, 0x000400fa,
    0x00000053, 0x00000054, 0x00000055, 0x000200f8, 0x00000054, 0x0004003d, 0x00000011, 0x00000056,
    0x00000013, 0x0004003d, 0x0000001e, 0x00000057, 0x00000020, 0x0004006f, 0x00000011, 0x00000058,
    0x00000057, 0x00050081, 0x00000011, 0x00000059, 0x00000056, 0x00000058, 0x0006000c, 0x00000011,
    0x0000005a, 0x00000001, 0x00000045, 0x00000059, 0x0003003e, 0x00000013, 0x0000005a, 0x000200f9,
    0x00000055, 0x000200f8, 0x00000055, 0x000200f9, 0x0000002d, 0x000200f8, 0x0000002d, 0x0004003d,
    0x00000018, 0x0000005b, 0x00000029, 0x00050080, 0x00000018, 0x0000005c, 0x0000005b, 0x0000004c,
    0x0003003e, 0x00000029, 0x0000005c, 0x000200f9, 0x0000002a, 0x000200f8, 0x0000002c, 0x0004003d,
    0x00000006, 0x0000005d, 0x00000008, 0x0004003d, 0x00000011, 0x0000005e, 0x00000013, 0x0004003d,
    0x0000001e, 0x0000005f, 0x00000020, 0x0004006f, 0x00000011, 0x00000060, 0x0000005f, 0x00050081,
    0x00000011, 0x00000061, 0x0000005e, 0x00000060, 0x00060041, 0x0000001b, 0x00000062, 0x00000017,
    0x00000019, 0x0000005d, 0x0003003e, 0x00000062, 0x00000061, 0x000100fd, 0x00010038,
};

#include <dlfcn.h>
static VkDevice dev;
static VkQueue queue;
static int verbose;

static void wait_at_exit(void) {
    VkResult r = vkDeviceWaitIdle(dev);
    if (verbose)
        fprintf(stderr, "at-exit vkDeviceWaitIdle: %d\n", (int)r);
}

int main(int argc, char **argv) {
    int npipes = argc > 1 ? atoi(argv[1]) : 16;
    int iters = argc > 2 ? atoi(argv[2]) : 256;
    int groups = argc > 3 ? atoi(argv[3]) : 4;
    const char *mode = argc > 4 ? argv[4] : "plain";
    verbose = getenv("REPRO_VERBOSE") != NULL;

    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    VkInstance inst;
    CHECK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t ndev = 1;
    VkPhysicalDevice phys;
    VkResult er = vkEnumeratePhysicalDevices(inst, &ndev, &phys);
    if ((er != VK_SUCCESS && er != VK_INCOMPLETE) || ndev == 0) {
        fprintf(stderr, "no device\n");
        return 2;
    }
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, NULL);
    VkQueueFamilyProperties qp[8];
    if (nq > 8)
        nq = 8;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qp);
    uint32_t qf = 0;
    while (qf < nq && !(qp[qf].queueFlags & VK_QUEUE_COMPUTE_BIT))
        qf++;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = qf;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    CHECK(vkCreateDevice(phys, &dci, NULL, &dev));
    vkGetDeviceQueue(dev, qf, 0, &queue);
    if (!strcmp(mode, "pinned")) {  // diagnostic: construct LLVM 15's lazily built JIT listener
        void *llvm = dlopen("libLLVM-15.so.1", RTLD_NOW | RTLD_NOLOAD);  // (loaded by lavapipe)
        void *(*create)(void) =
            llvm ? (void *(*)(void))dlsym(llvm, "LLVMCreateGDBRegistrationListener") : NULL;
        if (!create) {
            fprintf(stderr, "no libLLVM-15 listener\n");
            return 2;
        }
        create();  // its function-local static now registers its destructor BEFORE our handler
    }
    if (!strcmp(mode, "atexit") || !strcmp(mode, "pinned"))
        atexit(wait_at_exit);  // Tally-like

    // One storage buffer of groups*64 vec4, host-visible (lavapipe: all memory is).
    VkDeviceSize size = (VkDeviceSize)groups * 64 * 16;
    VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    VkBuffer buf;
    CHECK(vkCreateBuffer(dev, &bci, NULL, &buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buf, &req);
    VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = (uint32_t)__builtin_ctz(req.memoryTypeBits);
    VkDeviceMemory mem;
    CHECK(vkAllocateMemory(dev, &mai, NULL, &mem));
    CHECK(vkBindBufferMemory(dev, buf, mem, 0));
    void *map;
    CHECK(vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &map));
    for (VkDeviceSize i = 0; i < size / 4; i++)
        ((float *)map)[i] = (float)(i % 97) * 0.01f;

    VkDescriptorSetLayoutBinding b = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                      VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo dl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dl.bindingCount = 1;
    dl.pBindings = &b;
    VkDescriptorSetLayout dsl;
    CHECK(vkCreateDescriptorSetLayout(dev, &dl, NULL, &dsl));
    VkPipelineLayoutCreateInfo pl = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &dsl;
    VkPipelineLayout layout;
    CHECK(vkCreatePipelineLayout(dev, &pl, NULL, &layout));
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    VkDescriptorPoolCreateInfo dp = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dp.maxSets = 1;
    dp.poolSizeCount = 1;
    dp.pPoolSizes = &ps;
    VkDescriptorPool pool;
    CHECK(vkCreateDescriptorPool(dev, &dp, NULL, &pool));
    VkDescriptorSetAllocateInfo dsa = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dsa.descriptorPool = pool;
    dsa.descriptorSetCount = 1;
    dsa.pSetLayouts = &dsl;
    VkDescriptorSet set;
    CHECK(vkAllocateDescriptorSets(dev, &dsa, &set));
    VkDescriptorBufferInfo dbi = {buf, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &dbi;
    vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);

    VkShaderModuleCreateInfo smi = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = sizeof(spirv);
    smi.pCode = spirv;
    VkShaderModule sm;
    CHECK(vkCreateShaderModule(dev, &smi, NULL, &sm));
    VkCommandPoolCreateInfo cpi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpi.queueFamilyIndex = qf;
    VkCommandPool cp;
    CHECK(vkCreateCommandPool(dev, &cpi, NULL, &cp));

    int warm = !strcmp(mode, "warm") || !strcmp(mode, "late");
    int total = npipes + warm;
    VkCommandBuffer *cmds = calloc((size_t)total, sizeof(*cmds));
    VkCommandBufferAllocateInfo cba = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cba.commandPool = cp;
    cba.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cba.commandBufferCount = (uint32_t)total;
    CHECK(vkAllocateCommandBuffers(dev, &cba, cmds));
    VkSpecializationMapEntry me[2] = {{0, 0, 4}, {1, 4, 4}};
    for (int k = 0; k < total; k++) {
        int32_t sc[2] = {k + 1, iters};
        VkSpecializationInfo si = {2, me, sizeof(sc), sc};
        VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
        cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
        cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
        cpci.stage.module = sm;
        cpci.stage.pName = "main";
        cpci.stage.pSpecializationInfo = &si;
        cpci.layout = layout;
        VkPipeline pipe;
        CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe));
        VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        CHECK(vkBeginCommandBuffer(cmds[k], &bi));
        vkCmdBindPipeline(cmds[k], VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
        vkCmdBindDescriptorSets(cmds[k], VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0,
                                NULL);
        vkCmdDispatch(cmds[k], (uint32_t)groups, 1, 1);
        CHECK(vkEndCommandBuffer(cmds[k]));
        if (warm && k == 0) {  // one dispatch compiled and run to completion first
            VkSubmitInfo s0 = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
            s0.commandBufferCount = 1;
            s0.pCommandBuffers = &cmds[0];
            CHECK(vkQueueSubmit(queue, 1, &s0, VK_NULL_HANDLE));
            CHECK(vkQueueWaitIdle(queue));
            if (!strcmp(mode, "warm"))
                atexit(wait_at_exit);
        }
    }
    VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(dev, &fci, NULL, &fence));
    VkSubmitInfo s = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    s.commandBufferCount = (uint32_t)npipes;
    s.pCommandBuffers = cmds + warm;
    CHECK(vkQueueSubmit(queue, 1, &s, fence));
    if (!strcmp(mode, "late"))
        atexit(wait_at_exit);
    if (!strcmp(mode, "wait"))
        CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
    if (verbose)
        fprintf(stderr, "submitted %d dispatches; fence status %d; exiting\n", npipes,
                (int)vkGetFenceStatus(dev, fence));
    exit(0);  // no wait, no destroy
}
