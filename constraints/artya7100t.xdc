## tcu_hw top on Arty A7-100T (XC7A100T) with MicroBlaze and the MIG DDR3 controller:
## TCU clock 25 MHz derived from the MIG's ui_clk (as in Tensil's speech robot), AXI width 64.
## m_axi_dram0 and m_axi_dram1 -> AXI interconnect -> MIG S_AXI,
## AXI DMA M_AXIS_MM2S -> instruction, reset <- peripheral_aresetn of the TCU clock domain.
create_clock -name tcu_clock -period 40.000 [get_ports clock]
set_false_path -from [get_ports reset]
