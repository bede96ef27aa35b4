## tcu_hw top on PYNQ-Z1 (Zynq-7020): TCU clock 50 MHz from FCLK_CLK0, AXI data width 64.
## m_axi_dram0 -> SmartConnect -> S_AXI_HP0, m_axi_dram1 -> SmartConnect -> S_AXI_HP2,
## AXI DMA M_AXIS_MM2S -> instruction (DMA M_AXI_MM2S -> S_AXI_HP1), reset <- peripheral_aresetn.
create_clock -name tcu_clock -period 20.000 [get_ports clock]
set_false_path -from [get_ports reset]
